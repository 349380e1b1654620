package localset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/netns"
	"github.com/fleetslice/fleetslice/internal/podnet"
)

// PodNetwork is a ClusterSet's real data path (package podnet): every Node a network
// namespace with the real node agent programming its nftables, every running Pod a namespace
// running its containers' commands, Pod CIDRs routed between all members.
type PodNetwork struct {
	Network  *podnet.Network
	Runtimes map[string]*podnet.Runtime
	// Agents are the node agents, one per Node, by Node name.
	Agents map[string]*Process

	cs         *ClusterSet
	forwarders []*netns.Forwarder
	kubelets   []*podnet.KubeletServer
	cancel     context.CancelFunc
}

// PodNetworkMissing lists what a pod network needs and this machine lacks; `fleetslice run`
// falls back to dry-run agents when it is not empty.
func PodNetworkMissing() []string { return podnet.Missing() }

// StartPodNetwork creates the pod network of every member's Nodes, runs a node agent in each
// Node's namespace (binDir/agent, programming nftables over netlink) and starts running Pods.
// Pods resolve names through their member's DNS when Up planned one that exec'd commands use.
func (cs *ClusterSet) StartPodNetwork(ctx context.Context, binDir string, log io.Writer) (pn *PodNetwork, err error) {
	network, err := podnet.New()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pn = &PodNetwork{Network: network, Runtimes: map[string]*podnet.Runtime{}, Agents: map[string]*Process{}, cs: cs, cancel: cancel}
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
	for _, member := range cs.Members {
		if err := pn.startMember(ctx, member, binDir, strings.Join(podCIDRs, ",")); err != nil {
			return pn, fmt.Errorf("%s: %w", member, err)
		}
	}
	if log != nil {
		fmt.Fprintf(log, "pod network %s: %d Nodes, each with a node agent programming its nftables\n",
			network.Prefix, len(pn.Agents))
	}
	return pn, nil
}

func (pn *PodNetwork) startMember(ctx context.Context, member, binDir, podCIDRs string) error {
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
		agent, err := cs.StartProcess("agent-"+n.Name, "ip", "netns", "exec", node.Netns, filepath.Join(binDir, "agent"),
			"--kubeconfig", cs.Kubeconfig, "--context", Context(member), "--node-name", n.Name,
			"--ip-families", "IPv4", "--pod-cidr", podCIDRs,
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
