package hints

import (
	"fmt"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// fuzzInput builds an Input from bytes: the first picks the mode, then each byte is one
// endpoint (zone, readiness, current hint), so the fuzzer explores every mix of them.
func fuzzInput(data []byte) Input {
	modes := []Mode{None, Auto, PreferSameZone, PreferSameNode}
	in := Input{AddressType: discoveryv1.AddressTypeIPv4, Zones: Zones{Zones: []topology.Zone{
		{Name: "a", MilliCPU: 4000}, {Name: "b", MilliCPU: 2000}, {Name: "c", MilliCPU: 1000}}}, Options: topology.DefaultOptions(), Mode: None}
	if len(data) == 0 {
		return in
	}
	in.Mode = modes[int(data[0])%len(modes)]
	zones := []string{"a", "b", "c", ""}
	for i, b := range data[1:min(len(data), 200)] {
		ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(b&0x10 == 0)}, NodeName: ptr.To(fmt.Sprint("node-", i))}
		if z := zones[b&3]; z != "" || b&0x20 != 0 {
			ep.Zone = ptr.To(z)
		}
		e := Endpoint{ID: endpoints.IdentityOf(&ep), Endpoint: &ep}
		if h := zones[(b>>2)&3]; h != "" {
			e.Current = zoneHint(h)
		}
		in.Endpoints = append(in.Endpoints, e)
	}
	return in
}

// FuzzDecide checks what holds for every input: the decision names only the input's endpoints,
// clears all of them when hints are off, hints every ready endpoint for a known zone when they
// are on, leaves its input alone, and does not depend on the order endpoints are listed in.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 1, 1, 2, 2, 2})
	f.Add([]byte{2, 0, 1, 0x12, 3})
	f.Add([]byte{3, 0x20, 0x21})
	f.Add([]byte{0, 4, 8, 12})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		before := fuzzInput(data)
		want, d := Decide(in)
		if !equality.Semantic.DeepEqual(in, before) {
			t.Fatal("Decide modified its input")
		}
		ids := map[endpoints.Identity]*discoveryv1.Endpoint{}
		for _, e := range in.Endpoints {
			ids[e.ID] = e.Endpoint
		}
		for id := range want {
			if _, ok := ids[id]; !ok {
				t.Fatalf("decided hints for %v, not an input endpoint", id)
			}
		}
		checkDecision(t, in, want, d)
		if d.Changed > len(in.Endpoints) || d.Hinted > len(in.Endpoints) {
			t.Fatalf("changed %d, hinted %d of %d endpoints", d.Changed, d.Hinted, len(in.Endpoints))
		}
		reversed := fuzzInput(data)
		slices.Reverse(reversed.Endpoints)
		again, d2 := Decide(reversed)
		if d2 != d || !equality.Semantic.DeepEqual(again, want) {
			t.Fatalf("the decision depends on the endpoints' order: %+v vs %+v", d, d2)
		}
	})
}

func checkDecision(t *testing.T, in Input, want map[endpoints.Identity]*discoveryv1.EndpointHints, d Decision) {
	t.Helper()
	if !d.Enabled {
		if d.Reason == "" || len(want) != len(in.Endpoints) {
			t.Fatalf("hints off (%q) but %d of %d endpoints decided", d.Reason, len(want), len(in.Endpoints))
		}
		for id, h := range want {
			if h != nil {
				t.Fatalf("hints off, yet %v hinted %v", id, h)
			}
		}
		return
	}
	ready := Ready(in.Endpoints)
	if d.Reason != "" || in.Mode == None || len(want) != len(ready) {
		t.Fatalf("hints on in mode %s with reason %q, %d decided for %d ready", in.Mode, d.Reason, len(want), len(ready))
	}
	for _, e := range ready {
		h := want[e.ID]
		zone := FirstZone(h)
		switch {
		case h == nil || !slices.ContainsFunc(in.Zones.Zones, func(z topology.Zone) bool { return z.Name == zone }):
			t.Fatalf("%s hinted %v, not a known zone", e.Endpoint.Addresses[0], h)
		case in.Mode != Auto && zone != *e.Endpoint.Zone:
			t.Fatalf("%s in zone %s hinted %s in mode %s", e.Endpoint.Addresses[0], *e.Endpoint.Zone, zone, in.Mode)
		case (len(h.ForNodes) > 0) != (in.Mode == PreferSameNode):
			t.Fatalf("%s: node hints %v in mode %s", e.Endpoint.Addresses[0], h.ForNodes, in.Mode)
		}
	}
}
