package endpointslice

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

func TestModeOf(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		td          *string
		want        hintMode
	}{
		{"nothing", nil, nil, hintsNone},
		{"annotation Auto", map[string]string{AnnotationTopologyMode: "Auto"}, nil, hintsAuto},
		{"annotation lower case", map[string]string{AnnotationTopologyMode: "auto"}, nil, hintsAuto},
		{"deprecated annotation", map[string]string{AnnotationTopologyAwareHints: "Auto"}, nil, hintsAuto},
		{"annotation wins over trafficDistribution", map[string]string{AnnotationTopologyMode: "Auto"}, ptr.To(corev1.ServiceTrafficDistributionPreferSameNode), hintsAuto},
		{"annotation Disabled leaves trafficDistribution", map[string]string{AnnotationTopologyMode: "Disabled"}, ptr.To(corev1.ServiceTrafficDistributionPreferClose), hintsSameZone},
		{"PreferSameZone", nil, ptr.To(corev1.ServiceTrafficDistributionPreferSameZone), hintsSameZone},
		{"PreferSameNode", nil, ptr.To(corev1.ServiceTrafficDistributionPreferSameNode), hintsSameNode},
		{"unknown trafficDistribution", nil, ptr.To("Elsewhere"), hintsNone},
	}
	for _, tc := range cases {
		svc := &corev1.Service{}
		svc.Annotations = tc.annotations
		svc.Spec.TrafficDistribution = tc.td
		if got := modeOf(svc); got != tc.want {
			t.Errorf("%s: modeOf = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func readyEndpoint(addr, zone string, hint string) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{addr}, Zone: ptr.To(zone), NodeName: ptr.To("node-" + zone),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}
	if hint != "" {
		ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: hint}}}
	}
	return ep
}

// hintedSet is the desired set of svc's port-8080 slices: the endpoints of the given slices
// without their hints, as endpoints.Build makes them.
func hintedSet(slices ...*discoveryv1.EndpointSlice) endpoints.Result {
	set := desiredSet(port(8080))
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			ep.Hints = nil
			set.Endpoints = append(set.Endpoints, ep)
		}
	}
	return endpoints.Result{Sets: []endpoints.Set{set}}
}

func autoInput(svc *corev1.Service, desired endpoints.Result, existing ...*discoveryv1.EndpointSlice) syncInput {
	zones := []topology.Zone{{Name: "a", MilliCPU: 1000}, {Name: "b", MilliCPU: 1000}}
	return syncInput{svc: svc, desired: desired, existing: existing, mode: modeOf(svc), zones: zoneShares{zones: zones}}
}

func TestPlanWritesHintsOnlyWhereTheyChange(t *testing.T) {
	r := testReconciler(t)
	svc := testService()
	svc.Annotations = map[string]string{AnnotationTopologyMode: "Auto"}
	hinted := ourSlice(svc, "hinted", port(8080))
	hinted.Endpoints = []discoveryv1.Endpoint{readyEndpoint("10.0.0.1", "a", "a"), readyEndpoint("10.0.0.2", "a", "a"), readyEndpoint("10.0.0.3", "a", "a")}
	bare := ourSlice(svc, "bare", port(8080))
	bare.Endpoints = []discoveryv1.Endpoint{readyEndpoint("10.0.0.4", "b", ""), readyEndpoint("10.0.0.5", "b", ""), readyEndpoint("10.0.0.6", "b", "")}
	desired := hintedSet(hinted, bare)
	p, err := planSync(autoInput(svc, desired, hinted, bare), r.Options)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.hints) != 1 || !p.hints[0].enabled || p.hints[0].changed != 3 {
		t.Fatalf("decisions = %+v", p.hints)
	}
	if len(p.update) != 1 || p.update[0].Name != "bare" || p.writes() != 1 || p.stats.Rehinted != 3 {
		t.Fatalf("only the slice whose hints changed may be written, got %v", p.update)
	}
	if bare.Endpoints[0].Hints != nil {
		t.Fatal("the plan modified a cached object")
	}

	// Same again with the written hints in place: nothing to write.
	p2, _ := planSync(autoInput(svc, desired, hinted, p.update[0]), r.Options)
	if p2.writes() != 0 || p2.hints[0].changed != 0 {
		t.Fatalf("hints already right must cost no write, got %d", p2.writes())
	}

	// Dropping the annotation clears every hint.
	svc.Annotations = nil
	p3, _ := planSync(autoInput(svc, desired, hinted, p.update[0]), r.Options)
	if p3.hints[0].enabled || p3.hints[0].changed != 6 || len(p3.update) != 2 {
		t.Fatalf("hints must be removed from both slices: %+v, %d updates", p3.hints, len(p3.update))
	}
}

func TestPlanPutsNewEndpointsIntoSlicesRewrittenForHints(t *testing.T) {
	r := testReconciler(t)
	r.Options.MaxEndpointsPerSlice = 5
	svc := testService()
	svc.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferSameZone)
	// "full" is the fuller slice, where a lone new endpoint would go; "stale" carries a hint that
	// no longer matches its endpoint's zone, so the plan rewrites it anyway.
	full := ourSlice(svc, "full", port(8080))
	full.Endpoints = []discoveryv1.Endpoint{readyEndpoint("10.0.0.1", "a", "a"), readyEndpoint("10.0.0.2", "a", "a"),
		readyEndpoint("10.0.0.3", "b", "b"), readyEndpoint("10.0.0.4", "b", "b")}
	stale := ourSlice(svc, "stale", port(8080))
	stale.Endpoints = []discoveryv1.Endpoint{readyEndpoint("10.0.0.5", "a", "b")}
	desired := hintedSet(full, stale)
	desired.Sets[0].Endpoints = append(desired.Sets[0].Endpoints, readyEndpoint("10.0.0.6", "b", ""))
	p, err := r.planFor(svc, desired, []*discoveryv1.EndpointSlice{full, stale}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if p.writes() != 1 || p.update[0].Name != "stale" || len(p.update[0].Endpoints) != 2 {
		t.Fatalf("want one update of stale holding the new endpoint, got %d writes: %v", p.writes(), p.update)
	}
	for _, ep := range p.update[0].Endpoints {
		if ep.Hints == nil || ep.Hints.ForZones[0].Name != *ep.Zone {
			t.Errorf("endpoint %s hinted %v, want its zone %s", ep.Addresses[0], ep.Hints, *ep.Zone)
		}
	}
	if d := p.hints[0]; !d.enabled || d.changed != 2 {
		t.Errorf("decision %+v, want enabled with 2 changes (the stale hint and the new endpoint)", d)
	}
}

func TestDecideHints(t *testing.T) {
	zones := zoneShares{zones: []topology.Zone{{Name: "a", MilliCPU: 1000}, {Name: "b", MilliCPU: 1000}}}
	ready := func(addr, zone, hint string) hintedEndpoint {
		ep := readyEndpoint(addr, zone, "")
		e := hintedEndpoint{id: endpoints.IdentityOf(&ep), ep: &ep}
		if hint != "" {
			e.current = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: hint}}}
		}
		return e
	}
	notReady := func(addr, zone, hint string) hintedEndpoint {
		e := ready(addr, zone, hint)
		e.ep.Conditions.Ready = ptr.To(false)
		return e
	}
	noZone := ready("10.0.0.9", "", "")
	noZone.ep.Zone = nil
	six := []hintedEndpoint{ready("10.0.0.1", "a", ""), ready("10.0.0.2", "a", ""), ready("10.0.0.3", "a", ""),
		ready("10.0.0.4", "b", ""), ready("10.0.0.5", "b", ""), ready("10.0.0.6", "b", "")}
	cases := []struct {
		name    string
		in      hintInput
		enabled bool
		reason  string
		// want maps addresses to the zone hinted ("-" for none); unlisted addresses keep theirs.
		want    map[string]string
		changed int
	}{
		{name: "None clears every hint, ready or not",
			in:     hintInput{mode: hintsNone, endpoints: []hintedEndpoint{ready("10.0.0.1", "a", "a"), notReady("10.0.0.2", "b", "b")}},
			reason: reasonDisabled, want: map[string]string{"10.0.0.1": "-", "10.0.0.2": "-"}, changed: 2},
		{name: "PreferSameZone hints ready endpoints to their zone and leaves the others",
			in:      hintInput{mode: hintsSameZone, endpoints: []hintedEndpoint{ready("10.0.0.1", "a", "a"), ready("10.0.0.2", "b", ""), notReady("10.0.0.3", "b", "a")}},
			enabled: true, want: map[string]string{"10.0.0.1": "a", "10.0.0.2": "b"}, changed: 1},
		{name: "PreferSameZone with an endpoint without zone clears all",
			in:     hintInput{mode: hintsSameZone, endpoints: []hintedEndpoint{ready("10.0.0.1", "a", "a"), noZone}},
			reason: string(topology.EndpointWithoutZone), want: map[string]string{"10.0.0.1": "-", "10.0.0.9": "-"}, changed: 1},
		{name: "Auto without zones clears all",
			in:     hintInput{mode: hintsAuto, zones: zoneShares{reason: topology.InsufficientNodeInfo, message: "no CPU"}, endpoints: six[:2]},
			reason: string(topology.InsufficientNodeInfo), want: map[string]string{"10.0.0.1": "-", "10.0.0.2": "-"}},
		{name: "Auto divides by CPU",
			in:      hintInput{mode: hintsAuto, zones: zones, options: topology.DefaultOptions(), endpoints: six},
			enabled: true, changed: 6,
			want: map[string]string{"10.0.0.1": "a", "10.0.0.2": "a", "10.0.0.3": "a", "10.0.0.4": "b", "10.0.0.5": "b", "10.0.0.6": "b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := make([]discoveryv1.Endpoint, len(tc.in.endpoints))
			for i, e := range tc.in.endpoints {
				before[i] = *e.ep.DeepCopy()
			}
			want, d := decideHints(tc.in)
			if d.enabled != tc.enabled || d.reason != tc.reason || d.changed != tc.changed || d.mode != tc.in.mode {
				t.Errorf("decision %+v, want enabled %v reason %q changed %d", d, tc.enabled, tc.reason, tc.changed)
			}
			if len(want) != len(tc.want) {
				t.Errorf("%d decisions, want %d: %v", len(want), len(tc.want), want)
			}
			for _, e := range tc.in.endpoints {
				zone, listed := tc.want[e.ep.Addresses[0]]
				h, decided := want[e.id]
				switch {
				case listed != decided:
					t.Errorf("%s: decided %v, want %v", e.ep.Addresses[0], decided, listed)
				case zone == "-" && h != nil:
					t.Errorf("%s: hints %v, want none", e.ep.Addresses[0], h)
				case decided && zone != "-" && firstZoneHint(h) != zone:
					t.Errorf("%s: hinted %v, want %s", e.ep.Addresses[0], h, zone)
				}
			}
			for i, e := range tc.in.endpoints {
				if !equality.Semantic.DeepEqual(before[i], *e.ep) {
					t.Errorf("decideHints modified endpoint %s", e.ep.Addresses[0])
				}
			}
		})
	}
}

func TestReportHintsEmitsOnStateChangesOnly(t *testing.T) {
	r := testReconciler(t)
	rec := events.NewFakeRecorder(10)
	r.Recorder = rec
	svc := testService()
	on := hintDecision{addressType: discoveryv1.AddressTypeIPv4, mode: hintsAuto, enabled: true, changed: 4, hinted: 4}
	off := hintDecision{addressType: discoveryv1.AddressTypeIPv4, mode: hintsAuto, reason: "InsufficientNumberOfEndpoints", message: "too few"}
	none := hintDecision{addressType: discoveryv1.AddressTypeIPv6, mode: hintsNone, reason: reasonDisabled}
	for _, ds := range [][]hintDecision{{on, none}, {on, none}, {off}, {off}, {on}} {
		r.reportHints(svc, ds)
	}
	// Another Service first met with its hints already in place, as after a restart.
	restarted := testService()
	restarted.Name = "restarted"
	r.reportHints(restarted, []hintDecision{{addressType: discoveryv1.AddressTypeIPv4, mode: hintsAuto, enabled: true, hinted: 4}})
	// And one asking for hints before it has endpoints: they are on, though none carries any yet.
	empty := testService()
	empty.Name = "empty"
	r.reportHints(empty, []hintDecision{{addressType: discoveryv1.AddressTypeIPv4, mode: hintsSameZone, enabled: true}})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 4 || !strings.Contains(got[0], "TopologyAwareHintsEnabled") ||
		!strings.Contains(got[1], "Warning TopologyAwareHintsDisabled") || !strings.Contains(got[1], "InsufficientNumberOfEndpoints") ||
		!strings.Contains(got[2], "TopologyAwareHintsEnabled") || !strings.Contains(got[3], "(PreferSameZone)") {
		t.Fatalf("events = %q", got)
	}
}

func TestCountChangesCountsWhatIsHintedAfterwards(t *testing.T) {
	zone := func(z string) *discoveryv1.EndpointHints {
		return &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: z}}}
	}
	id := func(ip string) endpoints.Identity { return endpoints.Identity{Addresses: ip} }
	eps := []hintedEndpoint{
		{id: id("10.0.0.1"), current: zone("a")}, // kept as it is
		{id: id("10.0.0.2"), current: zone("a")}, // moved to b
		{id: id("10.0.0.3"), current: zone("a")}, // cleared
		{id: id("10.0.0.4")},                     // hinted anew
		{id: id("10.0.0.5"), current: zone("c")}, // not decided: keeps its hints
		{id: id("10.0.0.6")},                     // not decided, none
	}
	want := map[endpoints.Identity]*discoveryv1.EndpointHints{
		id("10.0.0.1"): zone("a"), id("10.0.0.2"): zone("b"), id("10.0.0.3"): nil, id("10.0.0.4"): zone("a"),
	}
	d := hintDecision{}.countChanges(eps, want)
	if d.changed != 3 || d.hinted != 4 {
		t.Fatalf("changed %d, hinted %d; want 3 and 4", d.changed, d.hinted)
	}
}
