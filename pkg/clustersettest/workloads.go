package clustersettest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func randomSuffix() string { return rand.String(6) }

// nodeName names the n-th Node of zone in member: "<member>-<zone>-<n>". The name is also the
// Node's kubernetes.io/hostname label, a label value of at most 63 bytes, which a long cluster
// id (up to 56 characters) and zone overrun; such a name is cut and given a digest of the
// whole, so that it stays stable and distinct.
func nodeName(member, zone string, n int) string {
	name := fmt.Sprintf("%s-%s-%d", member, zone, n)
	if len(name) <= validation.LabelValueMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	digest := hex.EncodeToString(sum[:])[:10]
	cut := strings.TrimRight(name[:validation.LabelValueMaxLength-1-len(digest)], "-.")
	return cut + "-" + digest
}

// createNodes creates NodesPerZone ready Nodes in every zone, named by nodeName, with the zone
// label and allocatable CPU that topology hints read.
func (m *Member) createNodes(ctx context.Context) error {
	cpu, err := resource.ParseQuantity(m.opts.NodeCPU)
	if err != nil {
		return fmt.Errorf("NodeCPU %q: %w", m.opts.NodeCPU, err)
	}
	m.Nodes = map[string][]string{}
	for _, zone := range m.opts.Zones {
		for n := range m.opts.NodesPerZone {
			name := nodeName(m.Name, zone, n)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				corev1.LabelTopologyZone: zone,
				corev1.LabelHostname:     name,
			}}}
			if err := m.Client.Create(ctx, node); err != nil {
				return fmt.Errorf("creating Node %s: %w", name, err)
			}
			resources := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourcePods: resource.MustParse("110")}
			node.Status = corev1.NodeStatus{
				Capacity:    resources,
				Allocatable: resources,
				Conditions: []corev1.NodeCondition{{
					Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
					LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
				}},
			}
			if err := m.Client.Status().Update(ctx, node); err != nil {
				return fmt.Errorf("making Node %s ready: %w", name, err)
			}
			m.Nodes[zone] = append(m.Nodes[zone], name)
		}
	}
	return nil
}

func (m *Member) createNamespace(ctx context.Context, name string) error {
	if err := m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return fmt.Errorf("member %s: creating namespace %s: %w", m.Name, name, err)
	}
	return nil
}

// Pod describes a Pod for CreatePod. Only Name is required.
type Pod struct {
	Name   string
	Labels map[string]string
	// Zone places the Pod on one of the zone's Nodes (round robin); default the first zone.
	// Node, when set, wins.
	Zone string
	Node string
	// IP is the Pod's IP; default a fresh one from 10.(100+member index).0.0/16.
	IP string
	// NotReady creates the Pod running but not ready.
	NotReady bool
	// Ports are the container's ports, for Services with named target ports.
	Ports []corev1.ContainerPort
}

// CreatePod creates a Pod scheduled on a Node, then sets its status as a kubelet would: Running,
// with its IP and the Ready condition (True unless p.NotReady).
func (m *Member) CreatePod(ctx context.Context, namespace string, p Pod) (*corev1.Pod, error) {
	node, err := m.pickNode(p)
	if err != nil {
		return nil, err
	}
	ip := p.IP
	if ip == "" {
		ip = m.ips.next(m.index)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.Name, Labels: p.Labels},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app", Ports: p.Ports}},
		},
	}
	if err := m.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("member %s: creating Pod %s/%s: %w", m.Name, namespace, p.Name, err)
	}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		HostIP:     "192.0.2.1",
		PodIP:      ip,
		PodIPs:     []corev1.PodIP{{IP: ip}},
		StartTime:  ptrNow(),
		Conditions: []corev1.PodCondition{readyCondition(!p.NotReady)},
	}
	if err := m.Client.Status().Update(ctx, pod); err != nil {
		return nil, fmt.Errorf("member %s: setting Pod %s/%s running: %w", m.Name, namespace, p.Name, err)
	}
	return pod, nil
}

func (m *Member) pickNode(p Pod) (string, error) {
	if p.Node != "" {
		return p.Node, nil
	}
	zone := p.Zone
	if zone == "" {
		zone = m.opts.Zones[0]
	}
	nodes := m.Nodes[zone]
	if len(nodes) == 0 {
		return "", fmt.Errorf("member %s has no Node in zone %q (zones: %v)", m.Name, zone, m.opts.Zones)
	}
	return nodes[m.ips.count()%len(nodes)], nil
}

// SetPodReady flips a Pod's Ready condition, as a readiness probe would.
func (m *Member) SetPodReady(ctx context.Context, namespace, name string, ready bool) error {
	pod := &corev1.Pod{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); err != nil {
		return fmt.Errorf("member %s: reading Pod %s/%s: %w", m.Name, namespace, name, err)
	}
	cond := readyCondition(ready)
	replaced := false
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		pod.Status.Conditions = append(pod.Status.Conditions, cond)
	}
	if err := m.Client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("member %s: setting Pod %s/%s ready=%t: %w", m.Name, namespace, name, ready, err)
	}
	return nil
}

func readyCondition(ready bool) corev1.PodCondition {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}
}

func ptrNow() *metav1.Time {
	now := metav1.Now()
	return &now
}

// ipAllocator hands out Pod IPs unique within the ClusterSet: each member has its own /16.
type ipAllocator struct {
	mu sync.Mutex
	n  int
}

func (a *ipAllocator) next(member int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	return netip.AddrFrom4([4]byte{10, byte(100 + member), byte(a.n >> 8), byte(a.n)}).String()
}

func (a *ipAllocator) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}
