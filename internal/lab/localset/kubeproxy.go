package localset

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
)

// startKubeProxy runs kube-proxy for one Node in the Node's namespace, as the agent is run there:
// nftables mode, the Node's name as its own, the member's Pod CIDR as the cluster's (traffic from
// outside it to a Service is masqueraded), metrics and health on their usual ports of the Node's
// own loopback (kube-proxy refuses port 0; each Node's namespace has a loopback of its own, so
// they collide with nothing). --conntrack-max-per-core=0 leaves the host-wide nf_conntrack_max
// alone: it is not a Node's to change.
func (pn *PodNetwork) startKubeProxy(member, node, netnsName string, proxy nodeProxy) (*Process, error) {
	kubeconfig, err := pn.cs.memberKubeconfig(member)
	if err != nil {
		return nil, err
	}
	return pn.cs.StartProcess("kube-proxy-"+node, "ip", "netns", "exec", netnsName, proxy.kubeProxy,
		"--kubeconfig", kubeconfig, "--proxy-mode", "nftables", "--hostname-override", node,
		"--cluster-cidr", proxy.podCIDRs, "--conntrack-max-per-core", "0",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
}

// memberKubeconfig writes (once) a kubeconfig whose current context is member's: kube-proxy has
// no --context flag to pick one out of the ClusterSet's shared kubeconfig.
func (cs *ClusterSet) memberKubeconfig(member string) (string, error) {
	path := filepath.Join(cs.Workdir, "kubeconfigs", member+".kubeconfig")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	cfg, err := clientcmd.LoadFromFile(cs.Kubeconfig)
	if err != nil {
		return "", err
	}
	if _, ok := cfg.Contexts[Context(member)]; !ok {
		return "", fmt.Errorf("kubeconfig %s has no context %s", cs.Kubeconfig, Context(member))
	}
	cfg.CurrentContext = Context(member)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("writing %s's kubeconfig: %w", member, err)
	}
	return path, nil
}
