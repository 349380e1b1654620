package localset

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
)

// Zone is one availability zone of the simulated clusters. Nodes in different zones get different
// allocatable CPU so that CPU-proportional decisions are visible.
type Zone struct {
	Name     string `json:"name"`
	Region   string `json:"region"`
	NodeCPUs int    `json:"nodeCPUs"`
}

// DefaultZones are three zones whose Nodes have 8, 4 and 2 CPUs: with equal node counts the zones
// hold 4/7, 2/7 and 1/7 of the CPU.
func DefaultZones() []Zone {
	return []Zone{
		{Name: "zone-a", Region: "region-1", NodeCPUs: 8},
		{Name: "zone-b", Region: "region-1", NodeCPUs: 4},
		{Name: "zone-c", Region: "region-1", NodeCPUs: 2},
	}
}

// Scheme knows every type the local ClusterSet tools read or write.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, mcsv1beta1.Install} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building scheme: %v", err)) // programming error: types registered twice
		}
	}
	return s
}

// RESTConfig returns a client configuration for one cluster of the set.
func (cs *ClusterSet) RESTConfig(cluster string) (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cs.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: Context(cluster)},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %s: %w", Context(cluster), err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// Client returns a controller-runtime client for one cluster of the set.
func (cs *ClusterSet) Client(cluster string) (client.Client, error) {
	cfg, err := cs.RESTConfig(cluster)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: Scheme()})
}

func prepareMember(ctx context.Context, cs *ClusterSet, name string, opts Options) error {
	c, err := cs.Client(name)
	if err != nil {
		return err
	}
	defs, err := crds.Member()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, c, defs); err != nil {
		return err
	}
	// The member's ClusterSet identity, as KEP-2149 defines it. The API server's discovery can lag
	// a moment behind an Established CRD, so a kind it does not list yet is retried with a fresh
	// client (the old one caches discovery from before the CRDs existed).
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if c, err = cs.Client(name); err != nil {
			return false, err
		}
		err := clusterid.Ensure(ctx, c, name)
		if meta.IsNoMatchError(err) {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return fmt.Errorf("creating the ClusterProperty of %s: %w", name, err)
	}
	if opts.NodesPerCluster > maxNodesPerCluster {
		return fmt.Errorf("at most %d nodes per cluster (each gets a /23 of 10.<cluster>.0.0/16), got %d", maxNodesPerCluster, opts.NodesPerCluster)
	}
	member := slices.Index(cs.Members, name) + 1
	nodes := make([]string, 0, opts.NodesPerCluster)
	for i := range opts.NodesPerCluster {
		zone := opts.Zones[i%len(opts.Zones)]
		sized := zone
		sized.NodeCPUs *= max(opts.CPUScale[name], 1)
		node := simulatedNode(nodeName(name, zone, i/len(opts.Zones)), sized, podCIDR(member, i))
		if err := c.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		nodes = append(nodes, node.Name)
	}
	return warmIPPools(ctx, c, nodes)
}

// prepareBroker installs the ClusterSet's namespace, RBAC and admission policy in the broker and
// writes one kubeconfig per member holding that member's own broker identity.
func prepareBroker(ctx context.Context, cs *ClusterSet) error {
	cfg, err := cs.RESTConfig(cs.Broker)
	if err != nil {
		return err
	}
	kubeconfigs, err := broker.Prepare(ctx, cfg, broker.DefaultNamespace, cs.Members, broker.Options{})
	if err != nil {
		return err
	}
	for member, kubeconfig := range kubeconfigs {
		if err := os.WriteFile(cs.BrokerKubeconfig(member), kubeconfig, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// BrokerKubeconfig is the kubeconfig a member's manager reaches the broker with.
func (cs *ClusterSet) BrokerKubeconfig(member string) string {
	return filepath.Join(cs.Workdir, "broker-"+member+".kubeconfig")
}

// nodeName names the i-th Node of a zone in a member cluster.
func nodeName(member string, zone Zone, i int) string {
	return fmt.Sprintf("%s-%s-%d", member, zone.Name, i)
}

// simulatedNode is a Node kwok will keep Ready. Status is accepted on create for Nodes, which is
// how kwok's own examples declare capacity.
// maxNodesPerCluster is how many /23 Pod CIDRs fit a member's 10.<member>.0.0/16.
const maxNodesPerCluster = 128

// podCIDR is the i-th Node's Pod range in a member: distinct per Node and per cluster, so Pod IPs
// are unique across the ClusterSet as multi-cluster services need. A /23 rather than a /24:
// kwok hands out a Node's addresses by counting up from its range and reuses a deleted Pod's
// address only once it has seen the deletion, so a Node near its 250 Pods during a rollout ran
// past the end of a /24 into its neighbour's range, and two Pods shared an address.
func podCIDR(member, i int) string {
	return fmt.Sprintf("10.%d.%d.0/23", member, 2*i)
}

func simulatedNode(name string, zone Zone, podCIDR string) *corev1.Node {
	cpu := resource.MustParse(strconv.Itoa(zone.NodeCPUs))
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    cpu,
		corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 4*zone.NodeCPUs)),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:       name,
				corev1.LabelTopologyZone:   zone.Name,
				corev1.LabelTopologyRegion: zone.Region,
				"kubernetes.io/os":         "linux",
				"kubernetes.io/arch":       "amd64",
				"type":                     "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{PodCIDR: podCIDR, PodCIDRs: []string{podCIDR}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo:    corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux"},
		},
	}
}

// ProcessesUnder lists the live processes whose command line mentions dir: every component kwokctl
// starts is given paths inside its workdir, so this finds anything a ClusterSet left running.
func ProcessesUnder(dir string) []string {
	var found []string
	eachProcessUnder(dir, func(pid int, cmdline string) { found = append(found, strconv.Itoa(pid)+": "+cmdline) })
	return found
}

func processIDsUnder(dir string) []int {
	var pids []int
	eachProcessUnder(dir, func(pid int, _ string) { pids = append(pids, pid) })
	return pids
}

func eachProcessUnder(dir string, fn func(pid int, cmdline string)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ")
		if strings.Contains(cmdline, dir+string(filepath.Separator)) {
			fn(pid, cmdline)
		}
	}
}
