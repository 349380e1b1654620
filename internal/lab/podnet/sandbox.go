package podnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
)

// Sandbox is a Pod's network namespace: the Pod IP on a veth to its Node, the Node routing it.
type Sandbox struct {
	Netns string
	IP    netip.Addr
	node  *Node
	// link is the Node's end of the Pod's veth.
	link string
	dns  *netns.Forwarder
	// hostNetwork marks a Pod that runs in its Node's namespace: nothing of its own to delete.
	hostNetwork bool
}

// DNS is what a Pod's resolver is given: the address its processes query (inside the Pod's
// namespace, relayed to Target on the host) and its search path.
type DNS struct {
	// Address is host:port inside the Pod, port 53 for resolv.conf to name it.
	Address string
	// Target is the member's DNS server on the host.
	Target string
	// Namespace starts the search path, as the kubelet's resolv.conf does.
	Namespace string
}

// AddPod creates a Pod's namespace on node with ip. The id names the namespace and must be
// unique in the network (a Pod UID). With dns set, the Pod's processes resolve through it.
func (n *Network) AddPod(node *Node, id string, ip netip.Addr, dns *DNS) (*Sandbox, error) {
	// A hash, not a prefix of the id: interface names hold 15 characters, and ids that share a
	// beginning must not share a name.
	sum := sha256.Sum256([]byte(id))
	short := hex.EncodeToString(sum[:5])
	s := &Sandbox{Netns: n.Prefix + "-pod" + short, IP: ip, node: node, link: "p" + short}
	if err := addNamespace(s.Netns); err != nil {
		return nil, err
	}
	err := runAll(
		[]string{"-n", node.Netns, "link", "add", s.link, "type", "veth", "peer", "name", "eth0", "netns", s.Netns},
		[]string{"-n", node.Netns, "addr", "add", podGateway + "/32", "dev", s.link},
		[]string{"-n", node.Netns, "link", "set", s.link, "up"},
		[]string{"-n", s.Netns, "addr", "add", ip.String() + "/32", "dev", "eth0"},
		[]string{"-n", s.Netns, "link", "set", "eth0", "up"},
		[]string{"-n", s.Netns, "route", "add", podGateway, "dev", "eth0", "scope", "link"},
		[]string{"-n", s.Netns, "route", "add", "default", "via", podGateway, "dev", "eth0"},
		[]string{"-n", node.Netns, "route", "add", ip.String() + "/32", "dev", s.link},
	)
	if err == nil && dns != nil {
		err = s.resolveThrough(*dns)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("adding pod %s on %s: %w", id, node.Name, err), s.Delete())
	}
	return s, nil
}

// resolveThrough writes the resolv.conf `ip netns exec` mounts for the Pod's processes and
// relays their queries to the member's DNS.
func (s *Sandbox) resolveThrough(dns DNS) error {
	host, _, err := splitHostPort(dns.Address)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(etcDir(s.Netns), 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf("nameserver %s\nsearch %s.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
		host, dns.Namespace)
	if err := os.WriteFile(etcDir(s.Netns)+"/resolv.conf", []byte(conf), 0o644); err != nil {
		return err
	}
	s.dns, err = netns.ForwardIn(s.Netns, dns.Address, dns.Target)
	return err
}

// Delete removes the Pod's namespace and its route on the Node. Its processes must be gone.
func (s *Sandbox) Delete() error {
	if s.hostNetwork {
		return nil
	}
	var errs []error
	if s.dns != nil {
		errs = append(errs, s.dns.Close())
	}
	// Deleting one end of a veth deletes both; the route through it goes with the link.
	if err := run("-n", s.node.Netns, "link", "del", s.link); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	errs = append(errs, deleteNamespace(s.Netns))
	return errors.Join(errs...)
}

func splitHostPort(addr string) (string, string, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("DNS address %q: %w", addr, err)
	}
	return ap.Addr().String(), fmt.Sprint(ap.Port()), nil
}
