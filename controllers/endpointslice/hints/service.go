package hints

import (
	"cmp"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Service is the hint decision's input for a whole Service: one decision per address type, each
// over the endpoints of all the type's slice sets, since hints balance a zone's traffic across
// every endpoint of the type whatever its ports.
type Service struct {
	Mode    Mode
	Zones   Zones
	Options topology.Options
	// AddressTypes are the Service's address types (endpoints.AddressTypes); each gets a
	// decision, with or without endpoints.
	AddressTypes []discoveryv1.AddressType
	// Desired are the slice sets as they must be (endpoints.Build).
	Desired []endpoints.Set
	// Existing are the slices placement works on, by set key (endpoints.SliceKey).
	Existing map[string][]*discoveryv1.EndpointSlice
}

// Inputs returns the decision's input per address type, in address type order. The hints an
// endpoint carries now are those of its copy in an existing slice of the same set, the copy
// placement keeps (CurrentHints).
func (s Service) Inputs() []Input {
	perType := map[discoveryv1.AddressType][]Endpoint{}
	for _, set := range s.Desired {
		current := CurrentHints(s.Existing[set.Key])
		for i := range set.Endpoints {
			ep := &set.Endpoints[i]
			id := endpoints.IdentityOf(ep)
			perType[set.AddressType] = append(perType[set.AddressType], Endpoint{ID: id, Endpoint: ep, Current: current[id]})
		}
	}
	types := slices.Clone(s.AddressTypes)
	slices.Sort(types)
	out := make([]Input, 0, len(types))
	for _, at := range types {
		out = append(out, Input{AddressType: at, Mode: s.Mode, Zones: s.Zones, Options: s.Options, Endpoints: perType[at]})
	}
	return out
}

// DecideService decides every address type of s: the hints to write per address type (as Decide
// returns them) and the decisions, in address type order.
func DecideService(s Service) (map[discoveryv1.AddressType]map[endpoints.Identity]*discoveryv1.EndpointHints, []Decision) {
	byType := map[discoveryv1.AddressType]map[endpoints.Identity]*discoveryv1.EndpointHints{}
	var decisions []Decision
	for _, in := range s.Inputs() {
		want, d := Decide(in)
		byType[in.AddressType] = want
		decisions = append(decisions, d)
	}
	return byType, decisions
}

// CurrentHints maps each endpoint listed in a set's slices to its hints, taking the copy in the
// first slice by name, as placement keeps it. Slices being deleted are skipped: their endpoints
// are placed anew.
func CurrentHints(set []*discoveryv1.EndpointSlice) map[endpoints.Identity]*discoveryv1.EndpointHints {
	out := map[endpoints.Identity]*discoveryv1.EndpointHints{}
	sorted := slices.Clone(set)
	slices.SortStableFunc(sorted, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	for _, s := range sorted {
		if s.DeletionTimestamp != nil {
			continue
		}
		for i := range s.Endpoints {
			id := endpoints.IdentityOf(&s.Endpoints[i])
			if _, seen := out[id]; !seen {
				out[id] = s.Endpoints[i].Hints
			}
		}
	}
	return out
}
