package endpoints

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// upstreamSets runs the upstream reconciler (k8s.io/endpointslice v0.37.2)
// against a fake API server and returns the endpoints it writes, by set key.
// It is the oracle for "semantics equal to upstream".
func upstreamSets(t *testing.T, svc *corev1.Service, pods []*corev1.Pod, nodes map[string]*corev1.Node) map[string][]discoveryv1.Endpoint {
	t.Helper()
	nodeList := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		nodeList = append(nodeList, n)
	}
	r, client := testutil.UpstreamReconciler(t, nodeList, 1000)
	// Errors only report Pods on unknown Nodes; the slices are written anyway.
	_ = r.Reconcile(logr.Discard(), svc, pods, nil, time.Time{})
	list, err := client.DiscoveryV1().EndpointSlices(svc.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]discoveryv1.Endpoint{}
	for _, s := range list.Items {
		if len(s.Endpoints) == 0 {
			continue // the placeholder
		}
		key := SliceKey(&s)
		out[key] = append(out[key], s.Endpoints...)
	}
	return out
}

func compareWithUpstream(t *testing.T, svc *corev1.Service, pods []*corev1.Pod, nodes map[string]*corev1.Node) {
	t.Helper()
	want := upstreamSets(t, svc, pods, nodes)
	got := Desired(svc, PodsOf(pods), nodes)
	if len(got) != len(want) {
		t.Errorf("got %d sets, upstream wrote %d", len(got), len(want))
	}
	for _, set := range got {
		theirs, ok := want[set.Key]
		if !ok {
			t.Errorf("set %s (%v) not written by upstream", set.Key, set.Ports)
			continue
		}
		byID := map[Identity]discoveryv1.Endpoint{}
		for _, ep := range theirs {
			byID[IdentityOf(&ep)] = ep
		}
		if len(byID) != len(set.Endpoints) {
			t.Errorf("set %s: %d endpoints, upstream %d", set.Key, len(set.Endpoints), len(byID))
		}
		for _, ep := range set.Endpoints {
			up, ok := byID[IdentityOf(&ep)]
			if !ok {
				t.Errorf("set %s: endpoint %v not written by upstream", set.Key, ep.Addresses)
				continue
			}
			if !EndpointsEqual(ep, up) || up.Hints != nil {
				t.Errorf("set %s: endpoint differs\n ours     %v\n upstream %v", set.Key, ep, up)
			}
		}
	}
}

func TestDesiredMatchesUpstreamOnTables(t *testing.T) {
	pnr := func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }
	named := servicePorts(
		corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
		corev1.ServicePort{Name: "m", Port: 9, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9), AppProtocol: ptr.To("x")})
	pods := func() []*corev1.Pod {
		hosted := pod("h", "10.0.0.8")
		hosted.Spec.Hostname, hosted.Spec.Subdomain = "h", "web"
		done := pod("d", "10.0.0.9")
		done.Status.Phase = corev1.PodSucceeded
		return []*corev1.Pod{
			pod("a", "10.0.0.1", "fd00::1"), notReady(pod("b", "10.0.0.2")), terminating(pod("c", "fd00::3")),
			withContainerPort(pod("e", "10.0.0.5"), "http", 9090), withContainerPort(pod("f", "10.0.0.6"), "web", 80),
			onNode(pod("g", "10.0.0.7"), "node-x"), onNode(pod("i", "10.0.0.10"), "node-c"), hosted, done, pod("j"),
		}
	}
	for name, svc := range map[string]*corev1.Service{
		"IPv4":                      service(),
		"dual-stack named ports":    service(families(corev1.IPv4Protocol, corev1.IPv6Protocol), named),
		"headless without families": service(headless, families(), servicePorts()),
		"publishNotReadyAddresses":  service(pnr, families(corev1.IPv6Protocol, corev1.IPv4Protocol), named),
	} {
		t.Run(name, func(t *testing.T) { compareWithUpstream(t, svc, pods(), defaultNodes()) })
	}
}

// FuzzDesiredMatchesUpstream compares Desired with the upstream reconciler
// on random Services and Pods.
func FuzzDesiredMatchesUpstream(f *testing.F) {
	for seed := range uint64(20) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		svc, pods := randomWorld(rng)
		compareWithUpstream(t, svc, pods, defaultNodes())
	})
}

func randomWorld(rng *rand.Rand) (*corev1.Service, []*corev1.Pod) {
	pick := func(n int) int { return rng.IntN(n) }
	familyChoices := [][]corev1.IPFamily{nil, {corev1.IPv4Protocol}, {corev1.IPv6Protocol},
		{corev1.IPv4Protocol, corev1.IPv6Protocol}, {corev1.IPv6Protocol, corev1.IPv4Protocol}}
	svc := service(families(familyChoices[pick(len(familyChoices))]...))
	switch pick(3) {
	case 0:
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	case 1:
		svc.Spec.ClusterIP = "fd00:96::10"
	}
	svc.Spec.PublishNotReadyAddresses = pick(4) == 0
	portNames := []string{"http", "grpc", "metrics"}
	svc.Spec.Ports = nil
	for i := range pick(4) {
		sp := corev1.ServicePort{Name: portNames[i], Port: int32(80 + i), Protocol: corev1.ProtocolTCP}
		if pick(3) == 0 {
			sp.Protocol = corev1.ProtocolUDP
		}
		if pick(2) == 0 {
			sp.TargetPort = intstr.FromString(portNames[pick(3)])
		} else {
			sp.TargetPort = intstr.FromInt32(int32(8000 + pick(3)))
		}
		if pick(3) == 0 {
			sp.AppProtocol = ptr.To("h2c")
		}
		svc.Spec.Ports = append(svc.Spec.Ports, sp)
	}
	var pods []*corev1.Pod
	for i := range pick(25) {
		var ips []string
		switch pick(5) {
		case 0:
			ips = []string{fmt.Sprintf("10.0.%d.%d", pick(2), pick(6))}
		case 1:
			ips = []string{fmt.Sprintf("fd00::%x", pick(6))}
		case 2:
			ips = []string{fmt.Sprintf("10.0.0.%d", pick(6)), fmt.Sprintf("fd00::%x", pick(6))}
		case 3:
			ips = []string{fmt.Sprintf("0010.0.0.%d", pick(6))}
		}
		p := pod(fmt.Sprintf("p%d", i), ips...)
		p.Spec.NodeName = []string{"node-a", "node-b", "node-c", "node-x", ""}[pick(5)]
		p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}[pick(4)]
		if pick(2) == 0 {
			notReady(p)
		}
		if pick(4) == 0 {
			terminating(p)
		}
		if pick(3) == 0 {
			p.Spec.Hostname = fmt.Sprintf("h%d", i)
			p.Spec.Subdomain = []string{"web", "other", ""}[pick(3)]
		}
		p.Spec.Containers[0].Ports = nil
		for range pick(3) {
			cp := corev1.ContainerPort{Name: portNames[pick(3)], ContainerPort: int32(9000 + pick(3)), Protocol: corev1.ProtocolTCP}
			if pick(3) == 0 {
				cp.Protocol = corev1.ProtocolUDP
			}
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, cp)
		}
		if pick(3) == 0 {
			sidecar := corev1.Container{Name: "proxy", Ports: []corev1.ContainerPort{{Name: portNames[pick(3)], ContainerPort: 15001, Protocol: corev1.ProtocolTCP}}}
			if policy := []corev1.ContainerRestartPolicy{"", corev1.ContainerRestartPolicyAlways,
				corev1.ContainerRestartPolicyOnFailure}[pick(3)]; policy != "" {
				sidecar.RestartPolicy = ptr.To(policy)
			}
			p.Spec.InitContainers = []corev1.Container{sidecar}
		}
		pods = append(pods, p)
	}
	return svc, pods
}
