package endpointslice

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

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

// hintDecision is what the hints pass decided for one address type of a Service.
type hintDecision struct {
	addressType discoveryv1.AddressType
	mode        hintMode
	enabled     bool
	reason      string
	message     string
	// changed counts endpoints whose hints this sync rewrites.
	changed int
}

// finalSlice is a slice as it will be after the sync's writes; writable says whether it is a
// copy the sync already writes (a create or update) rather than an untouched cached object.
type finalSlice struct {
	obj      *discoveryv1.EndpointSlice
	writable bool
}

// applyHints sets each endpoint's hints for the Service's topology mode inside the writes the
// plan already makes, and turns an untouched slice into an update only when its hints change.
func (r *Reconciler) applyHints(svc *corev1.Service, p *syncPlan, existing []*discoveryv1.EndpointSlice, zones []topology.Zone, zonesReason topology.Reason, zonesMessage string) []hintDecision {
	mode := modeOf(svc)
	byType := map[discoveryv1.AddressType][]finalSlice{}
	for _, s := range p.create {
		byType[s.AddressType] = append(byType[s.AddressType], finalSlice{s, true})
	}
	written := map[string]bool{}
	for _, s := range p.update {
		written[s.Name] = true
		byType[s.AddressType] = append(byType[s.AddressType], finalSlice{s, true})
	}
	for _, s := range p.delete {
		written[s.Name] = true
	}
	for _, s := range existing {
		if !written[s.Name] {
			byType[s.AddressType] = append(byType[s.AddressType], finalSlice{s, false})
		}
	}

	var decisions []hintDecision
	for _, at := range slices.Sorted(maps.Keys(byType)) {
		group := byType[at]
		want, d := r.decideHints(mode, group, zones, zonesReason, zonesMessage)
		d.addressType = at
		for i := range group {
			d.changed += setHints(p, &group[i], want)
		}
		decisions = append(decisions, d)
	}
	return decisions
}

// decideHints returns the wanted hints per endpoint address (absent: leave as is, nil: none).
func (r *Reconciler) decideHints(mode hintMode, group []finalSlice, zones []topology.Zone, zonesReason topology.Reason, zonesMessage string) (map[string]*discoveryv1.EndpointHints, hintDecision) {
	d := hintDecision{mode: mode}
	want := map[string]*discoveryv1.EndpointHints{}
	clearAll := func() {
		for _, fs := range group {
			for _, ep := range fs.obj.Endpoints {
				want[ep.Addresses[0]] = nil
			}
		}
	}
	var ready []discoveryv1.Endpoint
	for _, fs := range group {
		for _, ep := range fs.obj.Endpoints {
			if len(ep.Addresses) > 0 && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ready = append(ready, ep)
			}
		}
	}
	slices.SortFunc(ready, func(a, b discoveryv1.Endpoint) int { return cmp.Compare(a.Addresses[0], b.Addresses[0]) })

	switch mode {
	case hintsNone:
		d.reason, d.message = reasonDisabled, "the Service asks for no topology-aware routing"
		clearAll()
	case hintsSameZone, hintsSameNode:
		for _, ep := range ready {
			if ep.Zone == nil || *ep.Zone == "" {
				d.reason, d.message = string(topology.EndpointWithoutZone), "endpoint "+ep.Addresses[0]+" has no zone"
				clearAll()
				return want, d
			}
		}
		d.enabled = true
		for _, ep := range ready {
			h := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: *ep.Zone}}}
			if mode == hintsSameNode && ep.NodeName != nil {
				h.ForNodes = []discoveryv1.ForNode{{Name: *ep.NodeName}}
			}
			want[ep.Addresses[0]] = h
		}
	case hintsAuto:
		if zonesReason != "" {
			d.reason, d.message = string(zonesReason), zonesMessage
			clearAll()
			return want, d
		}
		input := make([]topology.Endpoint, len(ready))
		enabledBefore := false
		for i, ep := range ready {
			input[i] = topology.Endpoint{Key: ep.Addresses[0], Zone: deref(ep.Zone), Hint: firstZoneHint(ep.Hints)}
			enabledBefore = enabledBefore || input[i].Hint != ""
		}
		opts := r.Options.Topology
		opts.EnabledBefore = enabledBefore
		res := topology.Allocate(zones, input, opts)
		if !res.Enabled {
			d.reason, d.message = string(res.Reason), res.Message
			clearAll()
			return want, d
		}
		d.enabled = true
		for i, ep := range ready {
			want[ep.Addresses[0]] = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: res.Hints[i]}}}
		}
	}
	return want, d
}

// setHints applies the wanted hints to one final slice, copying it into the plan's updates first
// when it was untouched and now changes. It returns how many endpoints changed.
func setHints(p *syncPlan, fs *finalSlice, want map[string]*discoveryv1.EndpointHints) int {
	changed := 0
	for i := range fs.obj.Endpoints {
		ep := &fs.obj.Endpoints[i]
		if len(ep.Addresses) == 0 {
			continue
		}
		h, ok := want[ep.Addresses[0]]
		if !ok || hintsEqual(ep.Hints, h) {
			continue
		}
		if !fs.writable {
			fs.obj, fs.writable = fs.obj.DeepCopy(), true
			p.update = append(p.update, fs.obj)
			ep = &fs.obj.Endpoints[i]
		}
		ep.Hints = h.DeepCopy()
		changed++
	}
	return changed
}

func hintsEqual(a, b *discoveryv1.EndpointHints) bool {
	if a == nil || b == nil {
		return (a == nil || len(a.ForZones)+len(a.ForNodes) == 0) && (b == nil || len(b.ForZones)+len(b.ForNodes) == 0)
	}
	return slices.Equal(a.ForZones, b.ForZones) && slices.Equal(a.ForNodes, b.ForNodes)
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

// zonesFor returns the zones CPU-proportional hints divide traffic between; only Auto mode needs
// them, so other Services skip the work.
func zonesFor(svc *corev1.Service, nodes map[string]*corev1.Node) ([]topology.Zone, topology.Reason, string) {
	if modeOf(svc) != hintsAuto {
		return nil, "", ""
	}
	list := make([]*corev1.Node, 0, len(nodes))
	for _, n := range nodes {
		list = append(list, n)
	}
	return topology.ZonesFromNodes(list)
}

// reportHints emits TopologyAwareHintsEnabled or TopologyAwareHintsDisabled, with the reason,
// whenever an address type's hint state changes, never on every sync. A Service that never asked
// for hints gets no event.
func (r *Reconciler) reportHints(svc *corev1.Service, decisions []hintDecision) {
	service := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	for _, d := range decisions {
		if d.changed > 0 {
			topologyHintChanges.WithLabelValues(string(d.mode)).Add(float64(d.changed))
		}
		state := "on"
		if !d.enabled {
			state = "off:" + d.reason
		}
		key := hintKey{service: service, addressType: d.addressType}
		r.hintMu.Lock()
		prev, known := r.hintStates[key]
		r.hintStates[key] = state
		r.hintMu.Unlock()
		if prev == state || (!known && d.mode == hintsNone) {
			continue
		}
		// The events API folds events that differ only in their note into one series, so the
		// reason code goes into the action too: each distinct reason stays visible.
		switch {
		case d.enabled:
			r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, "TopologyAwareHintsEnabled", "UpdateHints",
				"Topology aware hints enabled for %s endpoints (%s)", d.addressType, d.mode)
		case d.mode == hintsNone:
			r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, "TopologyAwareHintsDisabled", d.reason,
				"Topology aware hints removed from %s endpoints: %s (%s)", d.addressType, d.reason, d.message)
		default:
			r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, "TopologyAwareHintsDisabled", d.reason,
				"Topology aware hints (%s) not applied to %s endpoints: %s (%s)", d.mode, d.addressType, d.reason, d.message)
		}
	}
}

// forgetHints drops the remembered hint states of a deleted Service.
func (r *Reconciler) forgetHints(service types.NamespacedName) {
	r.hintMu.Lock()
	defer r.hintMu.Unlock()
	for key := range r.hintStates {
		if key.service == service {
			delete(r.hintStates, key)
		}
	}
}
