package localset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
	"github.com/fleetslice/fleetslice/internal/lab/podnet"
)

// PodNetwork is a ClusterSet's real data path (package podnet): every Node a network
// namespace with the real node agent programming its nftables, every running Pod a namespace
// running its containers' commands, Pod CIDRs routed between all members.
type PodNetwork struct {
	Network  *podnet.Network
	Runtimes map[string]*podnet.Runtime
	// Agents are the node agents, one per Node, by Node name.
	Agents map[string]*Process
	// KubeProxies are the kube-proxies, by Node name, of the members WithKubeProxy named: their
	// Nodes run kube-proxy instead of an agent.
	KubeProxies map[string]*Process

	cs         *ClusterSet
	forwarders []*netns.Forwarder
	kubelets   []*podnet.KubeletServer
	cancel     context.CancelFunc
}

// PodNetworkMissing lists what a pod network needs and this machine lacks; `fleetslice run`
// falls back to dry-run agents when it is not empty.
func PodNetworkMissing() []string { return podnet.Missing() }

// PodNetworkOption changes what StartPodNetwork runs on the Nodes.
type PodNetworkOption func(*podNetworkOptions)

type podNetworkOptions struct {
	kubeProxy map[string]string // kube-proxy binary by member
}

// WithKubeProxy has every Node of member run stock kube-proxy (binary, in nftables mode)
// instead of the node agent, as a cluster that keeps kube-proxy and runs no agent would:
// the derived Services and imported EndpointSlices of its imports are then all that carries
// ClusterSet traffic out of it.
func WithKubeProxy(member, binary string) PodNetworkOption {
	return func(o *podNetworkOptions) {
		if o.kubeProxy == nil {
			o.kubeProxy = map[string]string{}
		}
		o.kubeProxy[member] = binary
	}
}

// StartPodNetwork creates the pod network of every member's Nodes, runs a node agent in each
// Node's namespace (binDir/agent, programming nftables over netlink; kube-proxy instead on the
// members WithKubeProxy names) and starts running Pods. Pods resolve names through their
// member's DNS when Up planned one that exec'd commands use.
func (cs *ClusterSet) StartPodNetwork(ctx context.Context, binDir string, log io.Writer, opts ...PodNetworkOption) (pn *PodNetwork, err error) {
	var o podNetworkOptions
	for _, opt := range opts {
		opt(&o)
	}
	for member := range o.kubeProxy {
		if !slices.Contains(cs.Members, member) {
			return nil, fmt.Errorf("kube-proxy asked for on %q, which is not a member (members: %v)", member, cs.Members)
		}
	}
	network, err := podnet.New()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pn = &PodNetwork{Network: network, Runtimes: map[string]*podnet.Runtime{}, Agents: map[string]*Process{},
		KubeProxies: map[string]*Process{}, cs: cs, cancel: cancel}
	defer func() {
		if err != nil {
			err = errors.Join(err, pn.Stop())
			pn = nil
		}
	}()
	// Recorded before anything is created in it, so that Down finds it after a crash.
	cs.PodNetwork = network.Prefix
	if err := cs.save(); err != nil {
		return pn, err
	}
	var podCIDRs []string
	for i := range cs.Members {
		podCIDRs = append(podCIDRs, fmt.Sprintf("10.%d.0.0/16", i+1))
	}
	for i, member := range cs.Members {
		proxy := nodeProxy{agent: filepath.Join(binDir, "agent"), podCIDRs: strings.Join(podCIDRs, ",")}
		if bin, ok := o.kubeProxy[member]; ok {
			proxy = nodeProxy{kubeProxy: bin, podCIDRs: podCIDRs[i]}
		}
		if err := pn.startMember(ctx, member, proxy); err != nil {
			return pn, fmt.Errorf("%s: %w", member, err)
		}
	}
	if log != nil {
		fmt.Fprintf(log, "pod network %s: %d Nodes with a node agent, %d with kube-proxy, each programming its nftables\n",
			network.Prefix, len(pn.Agents), len(pn.KubeProxies))
	}
	return pn, nil
}

// nodeProxy is what programs a member's Nodes: the agent, or kube-proxy when kubeProxy is set.
// podCIDRs is the agent's --pod-cidr (every member's CIDR, comma-separated) or kube-proxy's
// --cluster-cidr (the member's own: kube-proxy takes one CIDR per IP family).
type nodeProxy struct {
	agent, kubeProxy, podCIDRs string
}

func (pn *PodNetwork) startMember(ctx context.Context, member string, proxy nodeProxy) error {
	cs := pn.cs
	c, err := cs.Client(member)
	if err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels{"type": "kwok"}); err != nil {
		return err
	}
	cfg, err := cs.RESTConfig(member)
	if err != nil {
		return err
	}
	api, err := url.Parse(cfg.Host)
	if err != nil {
		return fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	for _, n := range slices.SortedFunc(slices.Values(nodes.Items), func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) }) {
		cidr, err := netip.ParsePrefix(n.Spec.PodCIDR)
		if err != nil {
			return fmt.Errorf("node %s has no usable podCIDR %q: %w", n.Name, n.Spec.PodCIDR, err)
		}
		node, err := pn.Network.AddNode(member, n.Name, cidr)
		if err != nil {
			return err
		}
		// The agent reaches its API server at the kubeconfig's own address, relayed from the
		// Node's loopback to the host's: certificates and kubeconfig stay as they are.
		fwd, err := netns.ForwardTCPIn(node.Netns, api.Host, api.Host)
		if err != nil {
			return err
		}
		pn.forwarders = append(pn.forwarders, fwd)
		if proxy.kubeProxy != "" {
			p, err := pn.startKubeProxy(member, n.Name, node.Netns, proxy)
			if err != nil {
				return err
			}
			pn.KubeProxies[n.Name] = p
			continue
		}
		agent, err := cs.StartProcess("agent-"+n.Name, "ip", "netns", "exec", node.Netns, proxy.agent,
			"--kubeconfig", cs.Kubeconfig, "--context", Context(member), "--node-name", n.Name,
			"--ip-families", "IPv4", "--pod-cidr", proxy.podCIDRs,
			"--metrics-bind-address=0", "--health-probe-bind-address=0")
		if err != nil {
			return err
		}
		pn.Agents[n.Name] = agent
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	rt := &podnet.Runtime{Member: member, Network: pn.Network, Client: clientset,
		LogDir: filepath.Join(cs.Workdir, "pods", member)}
	if d, ok := cs.DNS[member]; ok && d.Exec {
		rt.DNS = &podnet.DNS{Address: d.Address, Target: d.Address}
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	pn.Runtimes[member] = rt
	if kl, ok := cs.Kubelets[member]; ok {
		srv, err := rt.ServeKubelet(kl.Address, kl.Kwok)
		if err != nil {
			return fmt.Errorf("serving the kubelet endpoint on %s: %w", kl.Address, err)
		}
		pn.kubelets = append(pn.kubelets, srv)
	}
	return nil
}

// Stop stops the Pods' processes and the agents, then removes every namespace.
func (pn *PodNetwork) Stop() error {
	pn.cancel()
	var errs []error
	for _, k := range pn.kubelets {
		errs = append(errs, k.Close())
	}
	for _, rt := range pn.Runtimes {
		errs = append(errs, rt.Stop())
	}
	for _, a := range pn.Agents {
		errs = append(errs, a.Stop(10*time.Second))
	}
	for _, p := range pn.KubeProxies {
		errs = append(errs, p.Stop(10*time.Second))
	}
	for _, f := range pn.forwarders {
		errs = append(errs, f.Close())
	}
	errs = append(errs, pn.Network.Close())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	pn.cs.PodNetwork = ""
	return pn.cs.save()
}

// Ask sends n requests from the first running Pod labelled app=<app> in namespace of a member to
// ip:port over TCP, each an HTTP/1.0 GET, and returns the last line of each answer ("" for a
// request nobody answered). Nothing is sent when the member has no such Pod running.
func (pn *PodNetwork) Ask(ctx context.Context, member, namespace, app, ip string, port int32, n int) []string {
	rt, ok := pn.Runtimes[member]
	if !ok {
		return nil
	}
	c, err := pn.cs.Client(member)
	if err != nil {
		return nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{"app": app}); err != nil {
		return nil
	}
	var sb *podnet.Sandbox
	for _, p := range pods.Items {
		if s, ok := rt.Sandbox(p.Namespace, p.Name); ok {
			sb = s
			break
		}
	}
	if sb == nil {
		return nil
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(int(port)))
	answers := make([]string, 0, n)
	for range n {
		answers = append(answers, askOnce(sb.Netns, addr))
	}
	return answers
}

// askOnce sends one request from inside a Pod's namespace and returns its answer's last line.
func askOnce(podNetns, addr string) string {
	conn, err := netns.DialIn(podNetns, "tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return ""
	}
	body, _ := io.ReadAll(io.LimitReader(conn, 4096))
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
