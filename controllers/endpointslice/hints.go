package endpointslice

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Annotations that opt a Service into CPU-proportional hints, as upstream reads them.
const (
	AnnotationTopologyMode = "service.kubernetes.io/topology-mode"
	// AnnotationTopologyAwareHints is the deprecated spelling, still honoured.
	AnnotationTopologyAwareHints = "service.kubernetes.io/topology-aware-hints"
)

// hintMode is how a Service's endpoints get hints.
type hintMode string

const (
	hintsNone      hintMode = "None"
	hintsAuto      hintMode = "Auto"
	hintsSameZone  hintMode = "PreferSameZone"
	hintsSameNode  hintMode = "PreferSameNode"
	reasonDisabled          = "TopologyModeDisabled"
)

// modeOf reads a Service's topology mode. The annotation set to Auto wins over
// spec.trafficDistribution, as upstream decides.
func modeOf(svc *corev1.Service) hintMode {
	for _, key := range []string{AnnotationTopologyMode, AnnotationTopologyAwareHints} {
		if v, ok := svc.Annotations[key]; ok && strings.EqualFold(v, "auto") {
			return hintsAuto
		}
	}
	if td := svc.Spec.TrafficDistribution; td != nil {
		switch *td {
		case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone:
			return hintsSameZone
		case corev1.ServiceTrafficDistributionPreferSameNode:
			return hintsSameNode
		}
	}
	return hintsNone
}

// zoneShares are the zones CPU-proportional hints divide traffic between, or why there are none.
type zoneShares struct {
	zones   []topology.Zone
	reason  topology.Reason
	message string
}

// zonesFor returns the zones CPU-proportional hints divide traffic between; only Auto mode needs
// them, so other Services skip the work.
func zonesFor(mode hintMode, nodes map[string]*corev1.Node) zoneShares {
	if mode != hintsAuto {
		return zoneShares{}
	}
	list := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		list = append(list, n)
	}
	zones, reason, message := topology.ZonesFromNodes(list)
	return zoneShares{zones: zones, reason: reason, message: message}
}

// hintInput is everything the hint decision for one address type of a Service depends on.
type hintInput struct {
	mode  hintMode
	zones zoneShares
	// options tune CPU-proportional hints.
	options topology.Options
	// endpoints are the address type's desired endpoints across its slice sets, each with the
	// hints it carries now.
	endpoints []hintedEndpoint
}

// hintedEndpoint is a desired endpoint and the hints its current copy in a slice carries (nil
// when it is new).
type hintedEndpoint struct {
	id      endpoints.Identity
	ep      *discoveryv1.Endpoint
	current *discoveryv1.EndpointHints
}

// hintDecision is what the hint decision found for one address type of a Service.
type hintDecision struct {
	addressType discoveryv1.AddressType
	mode        hintMode
	enabled     bool
	reason      string
	message     string
	// changed counts endpoints whose hints this sync rewrites; hinted, those that carry hints
	// after it.
	changed, hinted int
}

// decideHints returns the hints each endpoint must carry (an endpoint absent keeps the hints it
// has; nil means none) and the decision behind them. It is pure: the same input always gives the
// same output, and nothing in the input is modified.
func decideHints(in hintInput) (map[endpoints.Identity]*discoveryv1.EndpointHints, hintDecision) {
	d := hintDecision{mode: in.mode}
	want := map[endpoints.Identity]*discoveryv1.EndpointHints{}
	clearAll := func(reason, message string) {
		d.reason, d.message = reason, message
		for _, e := range in.endpoints {
			want[e.id] = nil
		}
	}
	var ready []hintedEndpoint
	for _, e := range in.endpoints {
		if len(e.ep.Addresses) > 0 && e.ep.Conditions.Ready != nil && *e.ep.Conditions.Ready {
			ready = append(ready, e)
		}
	}
	// Sorted by address so that CPU-proportional allocation sees the same order every sync.
	slices.SortStableFunc(ready, func(a, b hintedEndpoint) int { return cmp.Compare(a.ep.Addresses[0], b.ep.Addresses[0]) })

	switch in.mode {
	case hintsNone:
		clearAll(reasonDisabled, "the Service asks for no topology-aware routing")
	case hintsSameZone, hintsSameNode:
		for _, e := range ready {
			if e.ep.Zone == nil || *e.ep.Zone == "" {
				clearAll(string(topology.EndpointWithoutZone), "endpoint "+e.ep.Addresses[0]+" has no zone")
				return want, d.countChanges(in.endpoints, want)
			}
		}
		d.enabled = true
		for _, e := range ready {
			h := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: *e.ep.Zone}}}
			if in.mode == hintsSameNode && e.ep.NodeName != nil {
				h.ForNodes = []discoveryv1.ForNode{{Name: *e.ep.NodeName}}
			}
			want[e.id] = h
		}
	case hintsAuto:
		if in.zones.reason != "" {
			clearAll(string(in.zones.reason), in.zones.message)
			return want, d.countChanges(in.endpoints, want)
		}
		alloc := make([]topology.Endpoint, len(ready))
		opts := in.options
		opts.EnabledBefore = false
		for i, e := range ready {
			alloc[i] = topology.Endpoint{Key: e.ep.Addresses[0], Zone: deref(e.ep.Zone), Hint: firstZoneHint(e.current)}
			opts.EnabledBefore = opts.EnabledBefore || alloc[i].Hint != ""
		}
		res := topology.Allocate(in.zones.zones, alloc, opts)
		if !res.Enabled {
			clearAll(string(res.Reason), res.Message)
			return want, d.countChanges(in.endpoints, want)
		}
		d.enabled = true
		for i, e := range ready {
			want[e.id] = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: res.Hints[i]}}}
		}
	}
	return want, d.countChanges(in.endpoints, want)
}

// countChanges sets how many endpoints get other hints than they carry now, and how many carry
// hints afterwards.
func (d hintDecision) countChanges(eps []hintedEndpoint, want map[endpoints.Identity]*discoveryv1.EndpointHints) hintDecision {
	for _, e := range eps {
		h, ok := want[e.id]
		if ok && !endpoints.HintsEqual(e.current, h) {
			d.changed++
		}
		if (ok && h != nil) || (!ok && e.current != nil) {
			d.hinted++
		}
	}
	return d
}

func firstZoneHint(h *discoveryv1.EndpointHints) string {
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
