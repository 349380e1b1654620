package endpoints

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestEndpointsEqual(t *testing.T) {
	base := *endpoint("a", "10.0.0.1", true, true, false, "node-a", "zone-a", "a")
	base.DeprecatedTopology = map[string]string{"k": "v"}
	differs := map[string]func(*discoveryv1.Endpoint){
		"address":            func(ep *discoveryv1.Endpoint) { ep.Addresses = []string{"10.0.0.2"} },
		"address order":      func(ep *discoveryv1.Endpoint) { ep.Addresses = []string{"10.0.0.3", "10.0.0.1"} },
		"ready":              func(ep *discoveryv1.Endpoint) { ep.Conditions.Ready = ptr.To(false) },
		"ready unset":        func(ep *discoveryv1.Endpoint) { ep.Conditions.Ready = nil },
		"serving":            func(ep *discoveryv1.Endpoint) { ep.Conditions.Serving = ptr.To(false) },
		"terminating":        func(ep *discoveryv1.Endpoint) { ep.Conditions.Terminating = ptr.To(true) },
		"hostname":           func(ep *discoveryv1.Endpoint) { ep.Hostname = ptr.To("b") },
		"hostname unset":     func(ep *discoveryv1.Endpoint) { ep.Hostname = nil },
		"node":               func(ep *discoveryv1.Endpoint) { ep.NodeName = ptr.To("node-b") },
		"zone":               func(ep *discoveryv1.Endpoint) { ep.Zone = ptr.To("zone-b") },
		"zone unset":         func(ep *discoveryv1.Endpoint) { ep.Zone = nil },
		"targetRef UID":      func(ep *discoveryv1.Endpoint) { ep.TargetRef.UID = "other" },
		"targetRef unset":    func(ep *discoveryv1.Endpoint) { ep.TargetRef = nil },
		"deprecatedTopology": func(ep *discoveryv1.Endpoint) { ep.DeprecatedTopology = map[string]string{"k": "w"} },
	}
	for name, mutate := range differs {
		other := *base.DeepCopy()
		mutate(&other)
		if EndpointsEqual(base, other) || EndpointsEqual(other, base) {
			t.Errorf("%s: endpoints reported equal", name)
		}
	}
	same := map[string]func(*discoveryv1.Endpoint){
		"hints": func(ep *discoveryv1.Endpoint) {
			ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
		},
		"targetRef resourceVersion": func(ep *discoveryv1.Endpoint) { ep.TargetRef.ResourceVersion = "42" },
		"fresh pointers":            func(ep *discoveryv1.Endpoint) { ep.Zone = ptr.To("zone-a") },
	}
	for name, mutate := range same {
		other := *base.DeepCopy()
		mutate(&other)
		if !EndpointsEqual(base, other) {
			t.Errorf("%s: endpoints reported different", name)
		}
	}
	empty, unset := discoveryv1.Endpoint{Addresses: []string{}, DeprecatedTopology: map[string]string{}}, discoveryv1.Endpoint{}
	if !EndpointsEqual(empty, unset) {
		t.Errorf("empty and unset collections should be equal")
	}
}

func TestIdentityOf(t *testing.T) {
	ep := discoveryv1.Endpoint{
		Addresses: []string{"10.0.0.2", "10.0.0.1"},
		Hostname:  ptr.To("h"),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "u1"},
	}
	got := IdentityOf(&ep)
	if want := (Identity{Addresses: "10.0.0.1,10.0.0.2", Hostname: "h", Namespace: "ns", Name: "p"}); got != want {
		t.Errorf("IdentityOf = %+v, want %+v", got, want)
	}
	if !slices.Equal(ep.Addresses, []string{"10.0.0.2", "10.0.0.1"}) {
		t.Errorf("IdentityOf sorted its input's addresses")
	}
	recreated := *ep.DeepCopy()
	recreated.TargetRef.UID = "u2"
	recreated.Conditions.Ready = ptr.To(true)
	if IdentityOf(&recreated) != got {
		t.Errorf("UID and conditions must not change the identity")
	}
	for name, mutate := range map[string]func(*discoveryv1.Endpoint){
		"address":   func(e *discoveryv1.Endpoint) { e.Addresses = []string{"10.0.0.1"} },
		"hostname":  func(e *discoveryv1.Endpoint) { e.Hostname = nil },
		"Pod name":  func(e *discoveryv1.Endpoint) { e.TargetRef.Name = "q" },
		"namespace": func(e *discoveryv1.Endpoint) { e.TargetRef.Namespace = "other" },
	} {
		other := *ep.DeepCopy()
		mutate(&other)
		if IdentityOf(&other) == got {
			t.Errorf("%s must change the identity", name)
		}
	}
}

func TestHintsEqual(t *testing.T) {
	zone := func(names ...string) *discoveryv1.EndpointHints {
		h := &discoveryv1.EndpointHints{}
		for _, n := range names {
			h.ForZones = append(h.ForZones, discoveryv1.ForZone{Name: n})
		}
		return h
	}
	withNode := zone("a")
	withNode.ForNodes = []discoveryv1.ForNode{{Name: "n"}}
	cases := []struct {
		name string
		a, b *discoveryv1.EndpointHints
		want bool
	}{
		{"both unset", nil, nil, true},
		{"unset and empty", nil, zone(), true},
		{"unset and a zone", nil, zone("a"), false},
		{"same zone", zone("a"), zone("a"), true},
		{"other zone", zone("a"), zone("b"), false},
		{"zone order", zone("a", "b"), zone("b", "a"), false},
		{"a node more", zone("a"), withNode, false},
		{"same node", withNode, withNode.DeepCopy(), true},
	}
	for _, tc := range cases {
		if got := HintsEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: HintsEqual = %v, want %v", tc.name, got, tc.want)
		}
		if got := HintsEqual(tc.b, tc.a); got != tc.want {
			t.Errorf("%s (swapped): HintsEqual = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The targetRef decides which Pod an endpoint is; of its fields only the
// resourceVersion, which moves on every Pod write and which no consumer reads,
// is not content. Both controllers compare endpoints with EndpointsEqual, so
// this table is their shared contract (sliceplan's SameContent test checks it
// holds there too).
func TestEndpointsEqualTargetRef(t *testing.T) {
	ref := func(edit func(*corev1.ObjectReference)) discoveryv1.Endpoint {
		r := &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0", UID: "u1", ResourceVersion: "7"}
		if edit != nil {
			edit(r)
		}
		return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: r}
	}
	base := ref(nil)
	cases := []struct {
		name  string
		other discoveryv1.Endpoint
		equal bool
	}{
		{"same", ref(nil), true},
		{"resourceVersion moved (a Pod write)", ref(func(r *corev1.ObjectReference) { r.ResourceVersion = "8" }), true},
		{"resourceVersion unset (a writer that never sets it)", ref(func(r *corev1.ObjectReference) { r.ResourceVersion = "" }), true},
		{"UID (Pod recreated under its name)", ref(func(r *corev1.ObjectReference) { r.UID = "u2" }), false},
		{"UID and resourceVersion", ref(func(r *corev1.ObjectReference) { r.UID, r.ResourceVersion = "u2", "8" }), false},
		{"name", ref(func(r *corev1.ObjectReference) { r.Name = "web-1" }), false},
		{"namespace", ref(func(r *corev1.ObjectReference) { r.Namespace = "other" }), false},
		{"kind", ref(func(r *corev1.ObjectReference) { r.Kind = "Node" }), false},
		{"fieldPath", ref(func(r *corev1.ObjectReference) { r.FieldPath = "spec" }), false},
		{"unset", discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}}, false},
	}
	for _, tc := range cases {
		if got := EndpointsEqual(base, tc.other); got != tc.equal {
			t.Errorf("%s: EndpointsEqual = %v, want %v", tc.name, got, tc.equal)
		}
		if got := EndpointsEqual(tc.other, base); got != tc.equal {
			t.Errorf("%s (swapped): EndpointsEqual = %v, want %v", tc.name, got, tc.equal)
		}
	}
	// The comparison must not clear the resourceVersion it ignores.
	if base.TargetRef.ResourceVersion != "7" {
		t.Errorf("EndpointsEqual modified its input: %+v", base.TargetRef)
	}
}
