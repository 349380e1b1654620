// Package podnet gives a local ClusterSet a real pod network: every simulated Node is a network
// namespace, every Pod kwok runs gets a namespace of its own on a veth to its Node, and its
// containers' commands run there as host processes. Pod CIDRs are routed between every Node of
// every member through one more namespace, the fabric: a flat network, as Cilium ClusterMesh and
// Submariner's non-overlapping mode assume between clusters. A Pod's packet to a Service or
// ClusterSet IP is then translated by its own Node's agent rules, as on a real node.
//
// Addressing, all inside namespaces this package creates (the host's network is never touched):
//
//	fabric        169.254.1.1 on each link to a Node; routes NodeIP/32 and the Node's Pod CIDR
//	Node          NodeIP/32 on eth0 (10.254.x.y), default via 169.254.1.1; 169.254.2.1 on each
//	              link to a Pod, with a route PodIP/32 to it; forwarding on
//	Pod           PodIP/32 on eth0, default via 169.254.2.1
//
// Two gateway addresses, not one: a Node holds the Pods' gateway as its own address, so its own
// gateway (the fabric's) must differ.
package podnet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	fabricGateway = "169.254.1.1"
	podGateway    = "169.254.2.1"
)

// Node is one simulated Node's network namespace.
type Node struct {
	Member, Name string
	// Netns is the namespace's name under /run/netns.
	Netns string
	// IP is the Node's address on the fabric.
	IP      netip.Addr
	PodCIDR netip.Prefix
	// link is the fabric's end of the Node's veth.
	link string
}

// Network is one ClusterSet's pod network.
type Network struct {
	// Prefix starts the name of every namespace the network creates, so that Cleanup finds them
	// all after a crash.
	Prefix string

	mu    sync.Mutex
	nodes map[string]*Node // by member/node
	links int
}

// Missing lists what creating a pod network needs and this process lacks.
func Missing() []string {
	var missing []string
	if uid := os.Geteuid(); uid != 0 {
		missing = append(missing, fmt.Sprintf("root (running as uid %d)", uid))
	}
	for _, bin := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, "the "+bin+" binary in PATH")
		}
	}
	return missing
}

// New creates the fabric namespace of a new pod network. Close removes it and everything added.
func New() (*Network, error) {
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("a pod network needs %s", strings.Join(missing, " and "))
	}
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	n := &Network{Prefix: "fsnet" + hex.EncodeToString(suffix), nodes: map[string]*Node{}}
	if err := addNamespace(n.fabric()); err != nil {
		return nil, err
	}
	if err := forwarding(n.fabric()); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func (n *Network) fabric() string { return n.Prefix + "-fabric" }

// AddNode creates a Node's namespace, links it to the fabric and routes its Pod CIDR there.
func (n *Network) AddNode(member, name string, podCIDR netip.Prefix) (*Node, error) {
	n.mu.Lock()
	key := member + "/" + name
	if node, ok := n.nodes[key]; ok {
		n.mu.Unlock()
		return node, nil
	}
	n.links++
	k := n.links
	n.mu.Unlock()
	if k > 250*250 {
		return nil, fmt.Errorf("the pod network holds at most %d Nodes", 250*250)
	}
	node := &Node{
		Member: member, Name: name, PodCIDR: podCIDR.Masked(),
		Netns: fmt.Sprintf("%s-node%d", n.Prefix, k),
		IP:    netip.AddrFrom4([4]byte{10, 254, byte(k / 250), byte(k%250 + 1)}),
		link:  fmt.Sprintf("n%d", k),
	}
	if err := addNamespace(node.Netns); err != nil {
		return nil, err
	}
	ip := node.IP.String()
	err := runAll(
		[]string{"-n", n.fabric(), "link", "add", node.link, "type", "veth", "peer", "name", "eth0", "netns", node.Netns},
		[]string{"-n", n.fabric(), "addr", "add", fabricGateway + "/32", "dev", node.link},
		[]string{"-n", n.fabric(), "link", "set", node.link, "up"},
		[]string{"-n", node.Netns, "addr", "add", ip + "/32", "dev", "eth0"},
		[]string{"-n", node.Netns, "link", "set", "eth0", "up"},
		[]string{"-n", node.Netns, "route", "add", fabricGateway, "dev", "eth0", "scope", "link"},
		[]string{"-n", node.Netns, "route", "add", "default", "via", fabricGateway, "dev", "eth0"},
		[]string{"-n", n.fabric(), "route", "add", ip + "/32", "dev", node.link},
		[]string{"-n", n.fabric(), "route", "add", node.PodCIDR.String(), "via", ip, "dev", node.link},
	)
	if err == nil {
		err = forwarding(node.Netns)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("adding node %s: %w", key, err), deleteNamespace(node.Netns))
	}
	n.mu.Lock()
	n.nodes[key] = node
	n.mu.Unlock()
	return node, nil
}

// Node returns a Node added before, or nil.
func (n *Network) Node(member, name string) *Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[member+"/"+name]
}

// Nodes lists the Nodes of a member ("" for every member).
func (n *Network) Nodes(member string) []*Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*Node
	for _, node := range n.nodes {
		if member == "" || node.Member == member {
			out = append(out, node)
		}
	}
	return out
}

// Close deletes every namespace of the network. Processes must have been stopped first: a
// namespace outlives its name while a process is still inside.
func (n *Network) Close() error { return Cleanup(n.Prefix) }

// Cleanup kills the processes left inside every namespace whose name starts with prefix, by
// process id, and deletes those namespaces and their /etc/netns files: what Close does, also for
// a network whose process died.
func Cleanup(prefix string) error {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("ip netns list: %w", err)
	}
	var errs []error
	for line := range strings.SplitSeq(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], prefix+"-") {
			continue
		}
		killInside(fields[0])
		errs = append(errs, deleteNamespace(fields[0]))
	}
	return errors.Join(errs...)
}

// killInside sends SIGKILL to every process in a namespace and waits a moment for them to go.
func killInside(netns string) {
	for range 50 {
		out, err := exec.Command("ip", "netns", "pids", netns).Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			return
		}
		for _, field := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(field); err == nil && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func addNamespace(name string) error {
	if err := run("netns", "add", name); err != nil {
		return err
	}
	if err := run("-n", name, "link", "set", "lo", "up"); err != nil {
		return errors.Join(err, deleteNamespace(name))
	}
	return nil
}

// deleteNamespace removes a namespace's name and the resolver files `ip netns exec` mounts in it.
func deleteNamespace(name string) error {
	err := run("netns", "del", name)
	if err != nil && !strings.Contains(err.Error(), "No such file") {
		return err
	}
	return os.RemoveAll(etcDir(name))
}

// etcDir holds files `ip netns exec` bind-mounts over /etc for processes of the namespace.
func etcDir(netns string) string { return filepath.Join("/etc/netns", netns) }

// forwarding turns on IPv4 forwarding in a namespace (each namespace has its own setting, off by
// default).
func forwarding(netns string) error {
	out, err := exec.Command("ip", "netns", "exec", netns, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward").CombinedOutput()
	if err != nil {
		return fmt.Errorf("enabling forwarding in %s: %v: %s", netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func run(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func runAll(cmds ...[]string) error {
	for _, args := range cmds {
		if err := run(args...); err != nil {
			return err
		}
	}
	return nil
}
