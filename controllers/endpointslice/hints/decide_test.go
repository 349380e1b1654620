package hints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

func readyEndpoint(addr, zone string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Zone: ptr.To(zone), NodeName: ptr.To("node-" + zone),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
}

func zoneHint(z string) *discoveryv1.EndpointHints {
	return &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: z}}}
}

// ready is a ready endpoint in zone, carrying a hint for zone hint now ("" for none).
func ready(addr, zone, hint string) Endpoint {
	ep := readyEndpoint(addr, zone)
	e := Endpoint{ID: endpoints.IdentityOf(&ep), Endpoint: &ep}
	if hint != "" {
		e.Current = zoneHint(hint)
	}
	return e
}

func notReady(addr, zone, hint string) Endpoint {
	e := ready(addr, zone, hint)
	e.Endpoint.Conditions.Ready = ptr.To(false)
	return e
}

var twoZones = Zones{Zones: []topology.Zone{{Name: "a", MilliCPU: 1000}, {Name: "b", MilliCPU: 1000}}}

// sixOver returns six ready endpoints, three per zone, each carrying hint ("" for none).
func sixOver(hint string) []Endpoint {
	return []Endpoint{ready("10.0.0.1", "a", hint), ready("10.0.0.2", "a", hint), ready("10.0.0.3", "a", hint),
		ready("10.0.0.4", "b", hint), ready("10.0.0.5", "b", hint), ready("10.0.0.6", "b", hint)}
}

func TestDecide(t *testing.T) {
	noZone := ready("10.0.0.9", "", "")
	noZone.Endpoint.Zone = nil
	own := map[string]string{"10.0.0.1": "a", "10.0.0.2": "a", "10.0.0.3": "a", "10.0.0.4": "b", "10.0.0.5": "b", "10.0.0.6": "b"}
	cases := []struct {
		name    string
		in      Input
		enabled bool
		reason  string
		// want maps addresses to the zone hinted ("-" for none); unlisted addresses keep theirs.
		want             map[string]string
		changed, hinted  int
		nodeHintsPresent bool
	}{
		{name: "None clears every hint, ready or not",
			in:     Input{Mode: None, Endpoints: []Endpoint{ready("10.0.0.1", "a", "a"), notReady("10.0.0.2", "b", "b")}},
			reason: ReasonDisabled, want: map[string]string{"10.0.0.1": "-", "10.0.0.2": "-"}, changed: 2},
		{name: "PreferSameZone hints ready endpoints to their zone and leaves the others",
			in:      Input{Mode: PreferSameZone, Endpoints: []Endpoint{ready("10.0.0.1", "a", "a"), ready("10.0.0.2", "b", ""), notReady("10.0.0.3", "b", "a")}},
			enabled: true, want: map[string]string{"10.0.0.1": "a", "10.0.0.2": "b"}, changed: 1, hinted: 3},
		{name: "PreferSameNode adds the Node",
			in:      Input{Mode: PreferSameNode, Endpoints: []Endpoint{ready("10.0.0.1", "a", "a")}},
			enabled: true, want: map[string]string{"10.0.0.1": "a"}, changed: 1, hinted: 1, nodeHintsPresent: true},
		{name: "PreferSameZone with an endpoint without zone clears all",
			in:     Input{Mode: PreferSameZone, Endpoints: []Endpoint{ready("10.0.0.1", "a", "a"), noZone}},
			reason: string(topology.EndpointWithoutZone), want: map[string]string{"10.0.0.1": "-", "10.0.0.9": "-"}, changed: 1},
		{name: "Auto without zones clears all",
			in:     Input{Mode: Auto, Zones: Zones{Reason: topology.InsufficientNodeInfo, Message: "no CPU"}, Endpoints: sixOver("")[:2]},
			reason: string(topology.InsufficientNodeInfo), want: map[string]string{"10.0.0.1": "-", "10.0.0.2": "-"}},
		{name: "Auto divides by CPU",
			in:      Input{Mode: Auto, Zones: twoZones, Options: topology.DefaultOptions(), Endpoints: sixOver("")},
			enabled: true, changed: 6, hinted: 6, want: own},
		{name: "Auto below the minimum per zone clears the hints carried",
			in:     Input{Mode: Auto, Zones: twoZones, Options: topology.DefaultOptions(), Endpoints: sixOver("a")[:3]},
			reason: string(topology.InsufficientNumberOfEndpoints), changed: 3,
			want: map[string]string{"10.0.0.1": "-", "10.0.0.2": "-", "10.0.0.3": "-"}},
		{name: "Auto keeps hints on within the hysteresis band",
			// Four endpoints are below the three per zone that turn hints on, but not below
			// the two per zone that turn them off, so hints carried now stay on.
			in: Input{Mode: Auto, Zones: twoZones, Options: topology.DefaultOptions(),
				Endpoints: []Endpoint{ready("10.0.0.1", "a", "a"), ready("10.0.0.2", "a", "a"), ready("10.0.0.4", "b", "b"), ready("10.0.0.5", "b", "b")}},
			enabled: true, hinted: 4, want: map[string]string{"10.0.0.1": "a", "10.0.0.2": "a", "10.0.0.4": "b", "10.0.0.5": "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := make([]discoveryv1.Endpoint, len(tc.in.Endpoints))
			for i, e := range tc.in.Endpoints {
				before[i] = *e.Endpoint.DeepCopy()
			}
			want, d := Decide(tc.in)
			if d.Enabled != tc.enabled || d.Reason != tc.reason || d.Changed != tc.changed || d.Hinted != tc.hinted || d.Mode != tc.in.Mode {
				t.Errorf("decision %+v, want enabled %v reason %q changed %d hinted %d", d, tc.enabled, tc.reason, tc.changed, tc.hinted)
			}
			if len(want) != len(tc.want) {
				t.Errorf("%d decisions, want %d: %v", len(want), len(tc.want), want)
			}
			for _, e := range tc.in.Endpoints {
				zone, listed := tc.want[e.Endpoint.Addresses[0]]
				h, decided := want[e.ID]
				switch {
				case listed != decided:
					t.Errorf("%s: decided %v, want %v", e.Endpoint.Addresses[0], decided, listed)
				case zone == "-" && h != nil:
					t.Errorf("%s: hints %v, want none", e.Endpoint.Addresses[0], h)
				case decided && zone != "-" && FirstZone(h) != zone:
					t.Errorf("%s: hinted %v, want %s", e.Endpoint.Addresses[0], h, zone)
				case decided && h != nil && (len(h.ForNodes) > 0) != tc.nodeHintsPresent:
					t.Errorf("%s: node hints %v, want present %v", e.Endpoint.Addresses[0], h.ForNodes, tc.nodeHintsPresent)
				}
			}
			for i, e := range tc.in.Endpoints {
				if !equality.Semantic.DeepEqual(before[i], *e.Endpoint) {
					t.Errorf("Decide modified endpoint %s", e.Endpoint.Addresses[0])
				}
			}
		})
	}
}

func TestCountChangesCountsWhatIsHintedAfterwards(t *testing.T) {
	id := func(ip string) endpoints.Identity { return endpoints.Identity{Addresses: ip} }
	eps := []Endpoint{
		{ID: id("10.0.0.1"), Current: zoneHint("a")}, // kept as it is
		{ID: id("10.0.0.2"), Current: zoneHint("a")}, // moved to b
		{ID: id("10.0.0.3"), Current: zoneHint("a")}, // cleared
		{ID: id("10.0.0.4")},                         // hinted anew
		{ID: id("10.0.0.5"), Current: zoneHint("c")}, // not decided: keeps its hints
		{ID: id("10.0.0.6")},                         // not decided, none
	}
	want := map[endpoints.Identity]*discoveryv1.EndpointHints{
		id("10.0.0.1"): zoneHint("a"), id("10.0.0.2"): zoneHint("b"), id("10.0.0.3"): nil, id("10.0.0.4"): zoneHint("a"),
	}
	d := Decision{}.countChanges(eps, want)
	if d.Changed != 3 || d.Hinted != 4 {
		t.Fatalf("changed %d, hinted %d; want 3 and 4", d.Changed, d.Hinted)
	}
}

func TestReadyAndAllocation(t *testing.T) {
	eps := []Endpoint{ready("10.0.0.3", "b", ""), notReady("10.0.0.1", "a", "a"), ready("10.0.0.2", "a", "b"),
		{Endpoint: &discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
	got := Ready(eps)
	if len(got) != 2 || got[0].Endpoint.Addresses[0] != "10.0.0.2" || got[1].Endpoint.Addresses[0] != "10.0.0.3" {
		t.Fatalf("Ready = %v, want 10.0.0.2 and 10.0.0.3 in address order", got)
	}
	alloc, before := Allocation(got)
	want := []topology.Endpoint{{Key: "10.0.0.2", Zone: "a", Hint: "b"}, {Key: "10.0.0.3", Zone: "b"}}
	if !equality.Semantic.DeepEqual(alloc, want) || !before {
		t.Errorf("Allocation = %v, %v; want %v, true", alloc, before, want)
	}
}

func TestZonesFor(t *testing.T) {
	nodes := map[string]*corev1.Node{}
	for _, z := range []string{"a", "b"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + z, Labels: map[string]string{corev1.LabelTopologyZone: z}}}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		nodes[n.Name] = n
	}
	if z := ZonesFor(PreferSameZone, nodes); z.Zones != nil || z.Reason != "" {
		t.Errorf("a mode other than Auto needs no zones, got %+v", z)
	}
	z := ZonesFor(Auto, nodes)
	if z.Reason != "" || len(z.Zones) != 2 || z.Zones[0].Name != "a" || z.Zones[0].MilliCPU != 2000 {
		t.Errorf("ZonesFor(Auto) = %+v, want zones a and b with 2000m each", z)
	}
}
