package hints

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

func slice(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
}

func hinted(ep discoveryv1.Endpoint, zone string) discoveryv1.Endpoint {
	ep.Hints = zoneHint(zone)
	return ep
}

func TestCurrentHintsTakesTheCopyPlacementKeeps(t *testing.T) {
	ep := readyEndpoint("10.0.0.1", "a")
	gone := slice("a-gone", hinted(ep, "c"))
	gone.DeletionTimestamp = &metav1.Time{}
	// Listed by name: b-second holds a copy hinted b, a-first one hinted a, which placement keeps.
	got := CurrentHints([]*discoveryv1.EndpointSlice{slice("b-second", hinted(ep, "b")), gone, slice("a-first", hinted(ep, "a"))})
	if h, ok := got[endpoints.IdentityOf(&ep)]; !ok || FirstZone(h) != "a" || len(got) != 1 {
		t.Errorf("CurrentHints = %v, want the copy in a-first, hinted a", got)
	}
}

func TestDecideServiceDecidesEachAddressTypeOverAllItsSets(t *testing.T) {
	web := endpoints.Set{Key: "web", AddressType: discoveryv1.AddressTypeIPv4}
	api := endpoints.Set{Key: "api", AddressType: discoveryv1.AddressTypeIPv4}
	for i, e := range sixOver("") {
		if i%2 == 0 {
			web.Endpoints = append(web.Endpoints, *e.Endpoint)
		} else {
			api.Endpoints = append(api.Endpoints, *e.Endpoint)
		}
	}
	existing := map[string][]*discoveryv1.EndpointSlice{"web": {slice("web-1", hinted(web.Endpoints[0], "a"))}}
	s := Service{
		Mode: Auto, Zones: twoZones, Options: topology.DefaultOptions(),
		AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeIPv4},
		Desired:      []endpoints.Set{web, api}, Existing: existing,
	}
	inputs := s.Inputs()
	if len(inputs) != 2 || inputs[0].AddressType != discoveryv1.AddressTypeIPv4 || len(inputs[0].Endpoints) != 6 || len(inputs[1].Endpoints) != 0 {
		t.Fatalf("inputs %+v, want IPv4 with all six endpoints, then IPv6 with none", inputs)
	}
	if FirstZone(inputs[0].Endpoints[0].Current) != "a" || inputs[0].Endpoints[1].Current != nil {
		t.Errorf("current hints %v and %v, want a and none", inputs[0].Endpoints[0].Current, inputs[0].Endpoints[1].Current)
	}
	byType, decisions := DecideService(s)
	// Six endpoints over two zones of equal CPU are enough: hints go on across both sets, and
	// the one endpoint already hinted right is no change.
	if len(decisions) != 2 || !decisions[0].Enabled || decisions[0].Changed != 5 || decisions[0].AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("decisions %+v", decisions)
	}
	if decisions[1].AddressType != discoveryv1.AddressTypeIPv6 || decisions[1].Enabled || len(byType[discoveryv1.AddressTypeIPv6]) != 0 {
		t.Errorf("IPv6 without endpoints: %+v, %v", decisions[1], byType[discoveryv1.AddressTypeIPv6])
	}
	if len(byType[discoveryv1.AddressTypeIPv4]) != 6 {
		t.Errorf("IPv4 hints %v, want one per endpoint", byType[discoveryv1.AddressTypeIPv4])
	}
}
