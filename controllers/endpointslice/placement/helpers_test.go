package placement

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

var testPorts = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}

// ep is endpoint number i: a ready Pod p<i> at a unique IPv4 address.
func ep(i int) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		NodeName:   ptr.To("node-a"),
		Zone:       ptr.To("zone-a"),
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("u%d", i))},
	}
}

func eps(from, to int) []discoveryv1.Endpoint {
	out := make([]discoveryv1.Endpoint, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, ep(i))
	}
	return out
}

func notReadyEP(i int) discoveryv1.Endpoint {
	e := ep(i)
	e.Conditions.Ready, e.Conditions.Serving = ptr.To(false), ptr.To(false)
	return e
}

func hinted(e discoveryv1.Endpoint, zone string) discoveryv1.Endpoint {
	e.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
	return e
}

func slice(name string, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"gen": "1"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       copyPorts(testPorts),
		Endpoints:   endpoints,
	}
}

// staleLabel marks slices whose metadata is out of date in tests.
const staleLabel = "test.fleetslice.io/stale"

func isStale(s *discoveryv1.EndpointSlice) bool { _, ok := s.Labels[staleLabel]; return ok }

func input(max, slack int, desired []discoveryv1.Endpoint, existing ...*discoveryv1.EndpointSlice) Input {
	return Input{
		Existing: existing, Desired: desired, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: testPorts, MaxPerSlice: max, Slack: slack,
	}
}

// cluster stands in for the API server: it applies results as the
// reconciler would, naming created slices itself.
type cluster struct {
	slices  map[string]*discoveryv1.EndpointSlice
	created int
}

func newCluster(existing ...*discoveryv1.EndpointSlice) *cluster {
	c := &cluster{slices: map[string]*discoveryv1.EndpointSlice{}}
	for _, s := range existing {
		c.slices[s.Name] = s.DeepCopy()
	}
	return c
}

func (c *cluster) list() []*discoveryv1.EndpointSlice {
	names := make([]string, 0, len(c.slices))
	for name := range c.slices {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]*discoveryv1.EndpointSlice, len(names))
	for i, name := range names {
		out[i] = c.slices[name].DeepCopy()
	}
	return out
}

// apply writes r, failing t on writes the API server would reject. Like
// the reconciler, it writes current labels: a written slice is not stale.
func (c *cluster) apply(t testing.TB, r Result) {
	t.Helper()
	for _, s := range r.Create {
		if s.Name != "" {
			t.Fatalf("create with a name %q", s.Name)
		}
		c.created++
		s = s.DeepCopy()
		s.Name = fmt.Sprintf("gen-%04d", c.created)
		c.slices[s.Name] = s
	}
	for _, s := range r.Update {
		if _, ok := c.slices[s.Name]; !ok {
			t.Fatalf("update of unknown slice %q", s.Name)
		}
		s = s.DeepCopy()
		delete(s.Labels, staleLabel)
		c.slices[s.Name] = s
	}
	for _, s := range r.Delete {
		if _, ok := c.slices[s.Name]; !ok {
			t.Fatalf("delete of unknown slice %q", s.Name)
		}
		delete(c.slices, s.Name)
	}
}

// layout returns, per slice name, the Pod names of its endpoints in order.
func layout(ss []*discoveryv1.EndpointSlice) map[string][]string {
	out := map[string][]string{}
	for _, s := range ss {
		names := []string{}
		for _, e := range s.Endpoints {
			names = append(names, e.TargetRef.Name)
		}
		out[s.Name] = names
	}
	return out
}

func names(ss []*discoveryv1.EndpointSlice) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func sizes(ss []*discoveryv1.EndpointSlice) []int {
	out := []int{}
	for _, s := range ss {
		out = append(out, len(s.Endpoints))
	}
	return out
}

// location maps each endpoint identity to the slice it is in.
func location(ss []*discoveryv1.EndpointSlice) map[endpoints.Identity]string {
	out := map[endpoints.Identity]string{}
	for _, s := range ss {
		for i := range s.Endpoints {
			out[endpoints.IdentityOf(&s.Endpoints[i])] = s.Name
		}
	}
	return out
}
