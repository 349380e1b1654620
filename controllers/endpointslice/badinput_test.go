package endpointslice

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
)

// bigService has 100 ports with numeric target ports, and the given families.
func bigService(families ...corev1.IPFamily) *corev1.Service {
	svc := testService()
	svc.Spec.IPFamilies = families
	svc.Spec.Ports = nil
	for i := range 100 {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i), Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(2000 + i)),
		})
	}
	return svc
}

// manyPods returns n Running, Ready Pods over three zones' Nodes, with an IPv4 address and,
// when dual, an IPv6 one.
func manyPods(n int, dual bool) ([]*corev1.Pod, map[string]*corev1.Node) {
	nodes := map[string]*corev1.Node{}
	for _, z := range []string{"a", "b", "c"} {
		nodes["node-"+z] = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-" + z, Labels: map[string]string{corev1.LabelTopologyZone: "zone-" + z}},
			Status:     corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		}
	}
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		ips := []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)}}
		if dual {
			ips = append(ips, corev1.PodIP{IP: fmt.Sprintf("fd00::%x", i+1)})
		}
		pods[i] = &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{NodeName: []string{"node-a", "node-b", "node-c"}[i%3]},
			Status: corev1.PodStatus{
				Phase: corev1.PodRunning, PodIP: ips[0].IP, PodIPs: ips,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			},
		}
	}
	return pods, nodes
}

// TestPlanCapsTenThousandEndpointsWithAHundredPorts: a Service of 10,000 endpoints and 100
// ports gets the fewest slices the cap allows, none over it, every endpoint exactly once per
// family, every slice with all 100 ports; and the next sync over what was written writes
// nothing.
func TestPlanCapsTenThousandEndpointsWithAHundredPorts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		families []corev1.IPFamily
		dual     bool
		perSlice int
	}{
		{"IPv4, default cap", []corev1.IPFamily{corev1.IPv4Protocol}, false, 100},
		{"IPv4, largest cap", []corev1.IPFamily{corev1.IPv4Protocol}, false, 1000},
		{"dual-stack, default cap", []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, true, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 10000
			svc := bigService(tc.families...)
			pods, nodes := manyPods(n, tc.dual)
			opts := DefaultOptions()
			opts.MaxEndpointsPerSlice = tc.perSlice
			mode, _ := hints.ModeOf(svc)
			in := syncInput{svc: svc, desired: endpoints.Build(svc, endpoints.PodsOf(pods), nodes), mode: mode, zones: hints.ZonesFor(mode, nodes)}
			plan, err := planSync(in, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.update)+len(plan.delete) != 0 {
				t.Fatalf("a first sync only creates: %d updates, %d deletes", len(plan.update), len(plan.delete))
			}
			families := len(tc.families)
			if want := families * n / tc.perSlice; len(plan.create) != want {
				t.Fatalf("%d slices, want %d", len(plan.create), want)
			}
			seen := map[string]int{}
			for i, s := range plan.create {
				if len(s.Endpoints) > tc.perSlice {
					t.Fatalf("slice %d holds %d endpoints, over the cap %d", i, len(s.Endpoints), tc.perSlice)
				}
				if len(s.Ports) != 100 {
					t.Fatalf("slice %d has %d ports, want 100", i, len(s.Ports))
				}
				for _, ep := range s.Endpoints {
					seen[string(s.AddressType)+"/"+ep.Addresses[0]]++
				}
			}
			if len(seen) != families*n {
				t.Fatalf("%d distinct endpoints, want %d", len(seen), families*n)
			}
			for addr, times := range seen {
				if times != 1 {
					t.Fatalf("%s is listed %d times", addr, times)
				}
			}

			// Written, the slices are the next sync's existing ones: nothing to do.
			for i, s := range plan.create {
				s.Name = fmt.Sprintf("web-%d", i)
				s.Generation = 1
				in.existing = append(in.existing, s)
			}
			again, err := planSync(in, opts)
			if err != nil {
				t.Fatal(err)
			}
			if again.writes() != 0 {
				t.Fatalf("a sync with nothing changed plans %d writes", again.writes())
			}
		})
	}
}

// TestPlanFollowsTheServiceFamilies: the Service's ipFamilies decide which families get slices,
// whatever addresses the Pods have; a family the Service drops loses its slices.
func TestPlanFollowsTheServiceFamilies(t *testing.T) {
	pods, nodes := manyPods(7, true)
	opts := DefaultOptions()
	plan := func(svc *corev1.Service, existing []*discoveryv1.EndpointSlice) *syncPlan {
		t.Helper()
		mode, _ := hints.ModeOf(svc)
		p, err := planSync(syncInput{svc: svc, desired: endpoints.Build(svc, endpoints.PodsOf(pods), nodes), existing: existing, mode: mode, zones: hints.ZonesFor(mode, nodes)}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	byType := func(slices []*discoveryv1.EndpointSlice) map[discoveryv1.AddressType]int {
		out := map[discoveryv1.AddressType]int{}
		for _, s := range slices {
			out[s.AddressType] += len(s.Endpoints)
		}
		return out
	}
	dual := plan(bigService(corev1.IPv4Protocol, corev1.IPv6Protocol), nil)
	if got := byType(dual.create); got[discoveryv1.AddressTypeIPv4] != 7 || got[discoveryv1.AddressTypeIPv6] != 7 || len(got) != 2 {
		t.Fatalf("dual-stack Service of dual-stack Pods: endpoints by type %v, want 7 of each", got)
	}
	for i, s := range dual.create {
		s.Name = fmt.Sprintf("web-%d", i)
	}
	v6 := plan(bigService(corev1.IPv6Protocol), dual.create)
	if len(v6.create) != 0 || len(v6.update) != 0 {
		t.Fatalf("dropping IPv4 needs no new slice: %d creates, %d updates", len(v6.create), len(v6.update))
	}
	if got := byType(v6.delete); len(got) != 1 || got[discoveryv1.AddressTypeIPv4] != 7 {
		t.Fatalf("dropping IPv4 deletes the IPv4 slices only: deleted endpoints by type %v", got)
	}
}
