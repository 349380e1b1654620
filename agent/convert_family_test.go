package agent

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

func dualStack(s *corev1.Service) {
	s.Spec.ClusterIPs = []string{"10.0.0.10", "fd00:10::a"}
}

func v6(port int32, eps ...ep) *discoveryv1.EndpointSlice {
	return slice("web-v6", discoveryv1.AddressTypeIPv6, port, eps...)
}

// Each family is selected on its own, as kube-proxy's per-family proxiers do (without it the
// per-family invariant of FuzzConvertBadShapes fails on its dual-stack seed).
func TestConvertSelectsEachFamilyOnItsOwn(t *testing.T) {
	tests := []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []dataplane.Endpoint
	}{{
		name: "IPv4 falls back to terminating endpoints although IPv6 ones are ready",
		slices: []*discoveryv1.EndpointSlice{
			v4(8080, ep{"10.1.0.1", "node-b", "st", nil}),
			v6(8080, ep{"fd00:1::1", "node-b", "rs", nil}),
		},
		want: dpEps("10.1.0.1:8080", "[fd00:1::1]:8080"),
	}, {
		name: "IPv4 follows its zone hints although IPv6 endpoints have none",
		slices: []*discoveryv1.EndpointSlice{
			v4(8080, ep{"10.1.0.1", "node-b", "rs", []string{"zone-a"}}, ep{"10.1.0.2", "node-b", "rs", []string{"zone-b"}}),
			v6(8080, ep{"fd00:1::1", "node-b", "rs", nil}, ep{"fd00:1::2", "node-b", "rs", nil}),
		},
		want: dpEps("10.1.0.1:8080", "[fd00:1::1]:8080", "[fd00:1::2]:8080"),
	}}
	for _, tt := range tests {
		c := Convert(ServiceInputs{Service: svc(dualStack), Slices: tt.slices}, thisNode)
		if len(c.Service.Ports) != 1 {
			t.Fatalf("%s: %+v", tt.name, c)
		}
		got := slices.Clone(c.Service.Ports[0].Endpoints)
		slices.SortFunc(got, func(a, b dataplane.Endpoint) int { return a.Addr.Compare(b.Addr) })
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: endpoints %v, want %v", tt.name, got, tt.want)
		}
	}
}

// An address of the other family in a slice is left out with a problem, not programmed in the
// other family's table (found by FuzzConvertBadShapes).
func TestConvertRefusesAnAddressOfTheWrongFamily(t *testing.T) {
	bad := v4(8080, ep{"fd00:1::1", "node-b", "rs", nil}, ep{"10.1.0.1", "node-b", "rs", nil})
	c := Convert(ServiceInputs{Service: svc(dualStack), Slices: []*discoveryv1.EndpointSlice{bad}}, thisNode)
	if want := dpEps("10.1.0.1:8080"); !slices.Equal(c.Service.Ports[0].Endpoints, want) {
		t.Errorf("endpoints %v, want %v", c.Service.Ports[0].Endpoints, want)
	}
	if len(c.Problems) != 1 {
		t.Errorf("problems %q, want one about fd00:1::1", c.Problems)
	}
}
