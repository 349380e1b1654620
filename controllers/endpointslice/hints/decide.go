package hints

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Zones are the zones CPU-proportional hints divide traffic between, or why there are none.
type Zones struct {
	Zones   []topology.Zone
	Reason  topology.Reason
	Message string
}

// ZonesOf sums the Nodes' CPU per zone (topology.ZonesFromNodes). The reason names the first
// unusable Node in the order given.
func ZonesOf(nodes []*corev1.Node) Zones {
	zones, reason, message := topology.ZonesFromNodes(nodes)
	return Zones{Zones: zones, Reason: reason, Message: message}
}

// ZonesFor returns the zones a Service in mode needs: only Auto mode divides traffic by CPU, so
// the others skip the work.
func ZonesFor(mode Mode, nodes map[string]*corev1.Node) Zones {
	if mode != Auto {
		return Zones{}
	}
	list := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		list = append(list, n)
	}
	return ZonesOf(list)
}

// Endpoint is a desired endpoint and the hints its current copy in a slice carries (nil when it
// is new, or listed without hints).
type Endpoint struct {
	ID       endpoints.Identity
	Endpoint *discoveryv1.Endpoint
	Current  *discoveryv1.EndpointHints
}

// Input is everything the hint decision for one address type of a Service depends on.
type Input struct {
	AddressType discoveryv1.AddressType
	Mode        Mode
	Zones       Zones
	// Options tune CPU-proportional hints; EnabledBefore is ignored, since the decision reads it
	// from the endpoints' current hints.
	Options topology.Options
	// Endpoints are the address type's desired endpoints across its slice sets.
	Endpoints []Endpoint
}

// Decision is what the hint decision found for one address type of a Service.
type Decision struct {
	AddressType discoveryv1.AddressType
	Mode        Mode
	Enabled     bool
	// Reason and Message say why hints are off; empty when they are on.
	Reason, Message string
	// Changed counts endpoints whose hints this decision rewrites; Hinted, those that carry
	// hints after it.
	Changed, Hinted int
}

// Ready returns the ready endpoints with an address, the only ones hints are decided for, sorted
// by address so that CPU-proportional allocation sees the same order every sync.
func Ready(eps []Endpoint) []Endpoint {
	var ready []Endpoint
	for _, e := range eps {
		if len(e.Endpoint.Addresses) > 0 && e.Endpoint.Conditions.Ready != nil && *e.Endpoint.Conditions.Ready {
			ready = append(ready, e)
		}
	}
	slices.SortStableFunc(ready, func(a, b Endpoint) int { return cmp.Compare(a.Endpoint.Addresses[0], b.Endpoint.Addresses[0]) })
	return ready
}

// Allocation is ready (from Ready) as the allocator sees it: keyed by first address, with the
// zone hint each carries now, and whether any carries one (hints were on: the hysteresis band).
func Allocation(ready []Endpoint) (alloc []topology.Endpoint, enabledBefore bool) {
	alloc = make([]topology.Endpoint, len(ready))
	for i, e := range ready {
		alloc[i] = topology.Endpoint{Key: e.Endpoint.Addresses[0], Zone: deref(e.Endpoint.Zone), Hint: FirstZone(e.Current)}
		enabledBefore = enabledBefore || alloc[i].Hint != ""
	}
	return alloc, enabledBefore
}

// Decide returns the hints each endpoint must carry (an endpoint absent keeps the hints it has;
// nil means none) and the decision behind them. The same input always gives the same output.
func Decide(in Input) (map[endpoints.Identity]*discoveryv1.EndpointHints, Decision) {
	d := Decision{AddressType: in.AddressType, Mode: in.Mode}
	want := map[endpoints.Identity]*discoveryv1.EndpointHints{}
	clearAll := func(reason, message string) {
		d.Reason, d.Message = reason, message
		for _, e := range in.Endpoints {
			want[e.ID] = nil
		}
	}
	ready := Ready(in.Endpoints)
	switch in.Mode {
	case None:
		clearAll(ReasonDisabled, "the Service asks for no topology-aware routing")
	case PreferSameZone, PreferSameNode:
		for _, e := range ready {
			if e.Endpoint.Zone == nil || *e.Endpoint.Zone == "" {
				clearAll(string(topology.EndpointWithoutZone), "endpoint "+e.Endpoint.Addresses[0]+" has no zone")
				return want, d.countChanges(in.Endpoints, want)
			}
		}
		d.Enabled = true
		for _, e := range ready {
			h := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: *e.Endpoint.Zone}}}
			if in.Mode == PreferSameNode && e.Endpoint.NodeName != nil {
				h.ForNodes = []discoveryv1.ForNode{{Name: *e.Endpoint.NodeName}}
			}
			want[e.ID] = h
		}
	case Auto:
		if in.Zones.Reason != "" {
			clearAll(string(in.Zones.Reason), in.Zones.Message)
			return want, d.countChanges(in.Endpoints, want)
		}
		alloc, before := Allocation(ready)
		opts := in.Options
		opts.EnabledBefore = before
		res := topology.Allocate(in.Zones.Zones, alloc, opts)
		if !res.Enabled {
			clearAll(string(res.Reason), res.Message)
			return want, d.countChanges(in.Endpoints, want)
		}
		d.Enabled = true
		for i, e := range ready {
			want[e.ID] = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: res.Hints[i]}}}
		}
	}
	return want, d.countChanges(in.Endpoints, want)
}

// countChanges sets how many endpoints get other hints than they carry now, and how many carry
// hints afterwards.
func (d Decision) countChanges(eps []Endpoint, want map[endpoints.Identity]*discoveryv1.EndpointHints) Decision {
	for _, e := range eps {
		h, ok := want[e.ID]
		if ok && !endpoints.HintsEqual(e.Current, h) {
			d.Changed++
		}
		if (ok && h != nil) || (!ok && e.Current != nil) {
			d.Hinted++
		}
	}
	return d
}

// FirstZone is the zone a hint names first, "" for none: the allocator reads one zone per
// endpoint.
func FirstZone(h *discoveryv1.EndpointHints) string {
	if h == nil || len(h.ForZones) == 0 {
		return ""
	}
	return h.ForZones[0].Name
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
