package endpointslice

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

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

func TestApplyHintsWritesOnlyWhereHintsChange(t *testing.T) {
	r := testReconciler(t)
	svc := testService()
	svc.Annotations = map[string]string{AnnotationTopologyMode: "Auto"}
	zones := []topology.Zone{{Name: "a", MilliCPU: 1000}, {Name: "b", MilliCPU: 1000}}
	hinted := ourSlice(svc, "hinted", port(8080))
	hinted.Endpoints = []discoveryv1.Endpoint{readyEndpoint("10.0.0.1", "a", "a"), readyEndpoint("10.0.0.2", "a", "a"), readyEndpoint("10.0.0.3", "a", "a")}
	bare := ourSlice(svc, "bare", port(8080))
	bare.Endpoints = []discoveryv1.Endpoint{readyEndpoint("10.0.0.4", "b", ""), readyEndpoint("10.0.0.5", "b", ""), readyEndpoint("10.0.0.6", "b", "")}
	p := &syncPlan{}
	decisions := r.applyHints(svc, p, []*discoveryv1.EndpointSlice{hinted, bare}, zones, "", "")
	if len(decisions) != 1 || !decisions[0].enabled || decisions[0].changed != 3 {
		t.Fatalf("decisions = %+v", decisions)
	}
	if len(p.update) != 1 || p.update[0].Name != "bare" {
		t.Fatalf("only the slice whose hints changed may be written, got %v", p.update)
	}
	if bare.Endpoints[0].Hints != nil {
		t.Fatal("applyHints modified a cached object")
	}

	// Same again with the written hints in place: nothing to write.
	p2 := &syncPlan{}
	r.applyHints(svc, p2, []*discoveryv1.EndpointSlice{hinted, p.update[0]}, zones, "", "")
	if len(p2.update) != 0 {
		t.Fatalf("hints already right must cost no write, got %d", len(p2.update))
	}

	// Dropping the annotation clears every hint.
	svc.Annotations = nil
	p3 := &syncPlan{}
	d := r.applyHints(svc, p3, []*discoveryv1.EndpointSlice{hinted, p.update[0]}, zones, "", "")
	if d[0].enabled || len(p3.update) != 2 {
		t.Fatalf("hints must be removed from both slices: %+v, %d updates", d, len(p3.update))
	}
}

func TestReportHintsEmitsOnStateChangesOnly(t *testing.T) {
	r := testReconciler(t)
	rec := events.NewFakeRecorder(10)
	r.Recorder = rec
	svc := testService()
	on := hintDecision{addressType: discoveryv1.AddressTypeIPv4, mode: hintsAuto, enabled: true}
	off := hintDecision{addressType: discoveryv1.AddressTypeIPv4, mode: hintsAuto, reason: "InsufficientNumberOfEndpoints", message: "too few"}
	none := hintDecision{addressType: discoveryv1.AddressTypeIPv6, mode: hintsNone, reason: reasonDisabled}
	for _, ds := range [][]hintDecision{{on, none}, {on, none}, {off}, {off}, {on}} {
		r.reportHints(svc, ds)
	}
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if len(got) != 3 || !strings.Contains(got[0], "TopologyAwareHintsEnabled") ||
		!strings.Contains(got[1], "Warning TopologyAwareHintsDisabled") || !strings.Contains(got[1], "InsufficientNumberOfEndpoints") ||
		!strings.Contains(got[2], "TopologyAwareHintsEnabled") {
		t.Fatalf("events = %q", got)
	}
}
