package sliceplan

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// SameContent compares endpoints with the EndpointSlice controller's EndpointsEqual plus hints.
// This is the case the two used to disagree on: an imported slice of this cluster's own
// endpoints keeps their targetRefs, and a source slice whose targetRef only moved its
// resourceVersion must not rewrite every import of it.
func TestSameContentEndpoints(t *testing.T) {
	base := localSlice("shop", "web", "web-1", "10.0.0.1")
	base.Endpoints[0].TargetRef.ResourceVersion = "5"
	cases := []struct {
		name string
		edit func(*discoveryv1.Endpoint)
		same bool
	}{
		{"unchanged", func(*discoveryv1.Endpoint) {}, true},
		{"targetRef resourceVersion moved", func(e *discoveryv1.Endpoint) { e.TargetRef.ResourceVersion = "6" }, true},
		{"targetRef UID (Pod recreated)", func(e *discoveryv1.Endpoint) { e.TargetRef.UID = "new" }, false},
		{"targetRef dropped", func(e *discoveryv1.Endpoint) { e.TargetRef = nil }, false},
		{"hint zone", func(e *discoveryv1.Endpoint) { e.Hints.ForZones[0].Name = "zone-z" }, false},
		{"hints emptied", func(e *discoveryv1.Endpoint) { e.Hints = &discoveryv1.EndpointHints{} }, false},
		{"ready", func(e *discoveryv1.Endpoint) { e.Conditions.Ready = new(bool) }, false},
	}
	for _, tc := range cases {
		other := *base.DeepCopy()
		tc.edit(&other.Endpoints[0])
		if got := SameContent(&base, &other); got != tc.same {
			t.Errorf("%s: SameContent = %v, want %v", tc.name, got, tc.same)
		}
	}
	unhinted, empty := *base.DeepCopy(), *base.DeepCopy()
	unhinted.Endpoints[0].Hints, empty.Endpoints[0].Hints = nil, &discoveryv1.EndpointHints{}
	if !SameContent(&unhinted, &empty) {
		t.Error("unset and empty hints route the same and must compare equal")
	}
}
