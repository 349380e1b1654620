package endpointslice

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

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
	mode, _ := hints.ModeOf(svc)
	return syncInput{svc: svc, desired: desired, existing: existing, mode: mode, zones: hints.Zones{Zones: zones}}
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
	if len(p.hints) != 1 || !p.hints[0].Enabled || p.hints[0].Changed != 3 {
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
	if p2.writes() != 0 || p2.hints[0].Changed != 0 {
		t.Fatalf("hints already right must cost no write, got %d", p2.writes())
	}

	// Dropping the annotation clears every hint.
	svc.Annotations = nil
	p3, _ := planSync(autoInput(svc, desired, hinted, p.update[0]), r.Options)
	if p3.hints[0].Enabled || p3.hints[0].Changed != 6 || len(p3.update) != 2 {
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
	if d := p.hints[0]; !d.Enabled || d.Changed != 2 {
		t.Errorf("decision %+v, want enabled with 2 changes (the stale hint and the new endpoint)", d)
	}
}

func TestReportHintsEmitsOnStateChangesOnly(t *testing.T) {
	r := testReconciler(t)
	rec := events.NewFakeRecorder(10)
	r.Recorder = rec
	svc := testService()
	on := hints.Decision{AddressType: discoveryv1.AddressTypeIPv4, Mode: hints.Auto, Enabled: true, Changed: 4, Hinted: 4}
	off := hints.Decision{AddressType: discoveryv1.AddressTypeIPv4, Mode: hints.Auto, Reason: "InsufficientNumberOfEndpoints", Message: "too few"}
	none := hints.Decision{AddressType: discoveryv1.AddressTypeIPv6, Mode: hints.None, Reason: hints.ReasonDisabled}
	for _, ds := range [][]hints.Decision{{on, none}, {on, none}, {off}, {off}, {on}} {
		r.reportHints(svc, ds)
	}
	// Another Service first met with its hints already in place, as after a restart.
	restarted := testService()
	restarted.Name = "restarted"
	r.reportHints(restarted, []hints.Decision{{AddressType: discoveryv1.AddressTypeIPv4, Mode: hints.Auto, Enabled: true, Hinted: 4}})
	// And one asking for hints before it has endpoints: they are on, though none carries any yet.
	empty := testService()
	empty.Name = "empty"
	r.reportHints(empty, []hints.Decision{{AddressType: discoveryv1.AddressTypeIPv4, Mode: hints.PreferSameZone, Enabled: true}})
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
