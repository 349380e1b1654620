package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Topology modes, as the EndpointSlice controller names them.
const (
	modeNone     = "None"
	modeAuto     = "Auto"
	modeSameZone = "PreferSameZone"
	modeSameNode = "PreferSameNode"
)

// HintReport is the zone hint decision for one address type.
type HintReport struct {
	AddressType discoveryv1.AddressType
	// Ready counts the ready endpoints, the only ones hints are decided for.
	Ready   int
	Enabled bool
	// Reason and Message say why hints are off (the allocator's reasons); empty when on.
	Reason, Message string
	// PerZone counts, per zone, endpoints hinted for it as decided and as in the cluster, and
	// the minimum the overload threshold needs (Auto mode only).
	PerZone []ZoneHints
	// Wrong lists the endpoints whose hints in the cluster differ from the decision.
	Wrong []WrongHint
	// Decided and Current are the expected traffic under the decided and the present hints.
	Decided, Current topology.Traffic
}

// ZoneHints is how many endpoints serve one zone.
type ZoneHints struct {
	Zone                      string
	Minimum, Decided, InPlace int
}

// WrongHint is one endpoint whose hint differs from the decision.
type WrongHint struct {
	Address, Zone, Have, Want string
}

// hintResult is the decision over every address type: the hints placement is to write, per
// address type, and the reports.
type hintResult struct {
	want    map[discoveryv1.AddressType]map[endpoints.Identity]*discoveryv1.EndpointHints
	reports []HintReport
	// ready counts ready endpoints per zone over all address types, for the zone table.
	ready map[string]int
}

// modeOf reads a Service's topology mode as the controller does: the annotation set to Auto
// wins over spec.trafficDistribution.
func modeOf(svc *corev1.Service) (mode, source string) {
	for _, key := range []string{endpointslice.AnnotationTopologyMode, endpointslice.AnnotationTopologyAwareHints} {
		if v, ok := svc.Annotations[key]; ok && strings.EqualFold(v, "auto") {
			return modeAuto, fmt.Sprintf("annotation %s=%s", key, v)
		}
	}
	if td := svc.Spec.TrafficDistribution; td != nil {
		switch *td {
		case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone:
			return modeSameZone, "spec.trafficDistribution=" + *td
		case corev1.ServiceTrafficDistributionPreferSameNode:
			return modeSameNode, "spec.trafficDistribution=" + *td
		}
	}
	return modeNone, fmt.Sprintf("neither annotation %s=Auto nor spec.trafficDistribution", endpointslice.AnnotationTopologyMode)
}

// selectionOf picks the Service's Pod selector as the controller does under scope, or says why
// the controller writes no slices for it.
func selectionOf(svc *corev1.Service, scope endpointslice.ServiceScope) (labels.Selector, string) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, "an ExternalName Service has no endpoints"
	}
	value, annotated := svc.Annotations[endpointslice.SelectorAnnotation]
	if svc.Spec.Selector != nil {
		if scope == endpointslice.ScopeOptedIn {
			return nil, fmt.Sprintf("the manager runs with --endpointslice-services=%s and the Service has spec.selector, so kube-controller-manager serves it", scope)
		}
		return labels.SelectorFromValidatedSet(svc.Spec.Selector), "spec.selector " + labels.Set(svc.Spec.Selector).String()
	}
	if !annotated {
		return nil, fmt.Sprintf("the Service has neither spec.selector nor annotation %s, so its slices are written by hand", endpointslice.SelectorAnnotation)
	}
	set, err := labels.ConvertSelectorToLabelsMap(value)
	if err != nil || len(set) == 0 {
		return nil, fmt.Sprintf("annotation %s=%q is not a selector of key=value pairs, so the controller keeps the slices as they are", endpointslice.SelectorAnnotation, value)
	}
	return labels.SelectorFromValidatedSet(set), fmt.Sprintf("annotation %s=%s", endpointslice.SelectorAnnotation, value)
}

// decideHints mirrors the controller's hint step (controllers/endpointslice, decideHints): per
// address type, the ready endpoints sorted by address with the hints they carry now go to
// topology.Allocate in Auto mode, or get their own zone (and node) in the PreferSame modes.
func decideHints(mode string, zones []topology.Zone, zoneReason topology.Reason, zoneMessage string,
	s Settings, sets []endpoints.Set, ours []*discoveryv1.EndpointSlice) hintResult {
	out := hintResult{want: map[discoveryv1.AddressType]map[endpoints.Identity]*discoveryv1.EndpointHints{}, ready: map[string]int{}}
	current := map[endpoints.Identity]*discoveryv1.EndpointHints{}
	for _, sl := range ours {
		for i := range sl.Endpoints {
			current[endpoints.IdentityOf(&sl.Endpoints[i])] = sl.Endpoints[i].Hints
		}
	}
	byType := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
	var types []discoveryv1.AddressType
	for _, set := range sets {
		if _, ok := byType[set.AddressType]; !ok {
			types = append(types, set.AddressType)
		}
		byType[set.AddressType] = append(byType[set.AddressType], set.Endpoints...)
	}
	for _, at := range types {
		var ready []discoveryv1.Endpoint
		for _, ep := range byType[at] {
			if len(ep.Addresses) > 0 && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ready = append(ready, ep)
				out.ready[deref(ep.Zone)]++
			}
		}
		slices.SortStableFunc(ready, func(a, b discoveryv1.Endpoint) int { return cmp.Compare(a.Addresses[0], b.Addresses[0]) })
		want, rep := decideType(mode, zones, zoneReason, zoneMessage, s, byType[at], ready, current)
		rep.AddressType = at
		out.want[at], out.reports = want, append(out.reports, rep)
	}
	return out
}

// decideType decides one address type's hints; want has an entry for every endpoint whose
// hints the controller sets (nil: none).
func decideType(mode string, zones []topology.Zone, zoneReason topology.Reason, zoneMessage string, s Settings,
	all, ready []discoveryv1.Endpoint, current map[endpoints.Identity]*discoveryv1.EndpointHints) (map[endpoints.Identity]*discoveryv1.EndpointHints, HintReport) {
	want := map[endpoints.Identity]*discoveryv1.EndpointHints{}
	rep := HintReport{Ready: len(ready)}
	clearAll := func(reason, message string) {
		rep.Reason, rep.Message = reason, message
		for i := range all {
			want[endpoints.IdentityOf(&all[i])] = nil
		}
	}
	alloc := make([]topology.Endpoint, len(ready))
	currentHints := make([]string, len(ready))
	opts := topology.Options{OverloadThreshold: s.OverloadThreshold, MinEndpointsPerZone: s.MinEndpointsPerZone}
	for i := range ready {
		hint := firstZone(current[endpoints.IdentityOf(&ready[i])])
		alloc[i] = topology.Endpoint{Key: ready[i].Addresses[0], Zone: deref(ready[i].Zone), Hint: hint}
		currentHints[i] = hint
		opts.EnabledBefore = opts.EnabledBefore || hint != ""
	}
	rep.Current = topology.ExpectedTraffic(zones, alloc, currentHints)
	var decided []string
	switch mode {
	case modeNone:
		clearAll("TopologyModeDisabled", "the Service asks for no topology-aware routing")
	case modeSameZone, modeSameNode:
		for i, ep := range ready {
			if deref(ep.Zone) == "" {
				clearAll(string(topology.EndpointWithoutZone), "endpoint "+ep.Addresses[0]+" has no zone")
				break
			}
			h := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: *ep.Zone}}}
			if mode == modeSameNode && ep.NodeName != nil {
				h.ForNodes = []discoveryv1.ForNode{{Name: *ep.NodeName}}
			}
			want[endpoints.IdentityOf(&ready[i])] = h
			decided = append(decided, *ep.Zone)
		}
		rep.Enabled = rep.Reason == ""
	case modeAuto:
		if zoneReason != "" {
			clearAll(string(zoneReason), zoneMessage)
			break
		}
		res := topology.Allocate(zones, alloc, opts)
		if !res.Enabled {
			clearAll(string(res.Reason), res.Message)
			break
		}
		rep.Enabled, decided = true, res.Hints
		for i := range ready {
			want[endpoints.IdentityOf(&ready[i])] = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: res.Hints[i]}}}
		}
	}
	if !rep.Enabled {
		decided = nil
	}
	rep.Decided = topology.ExpectedTraffic(zones, alloc, decided)
	rep.PerZone = perZone(zones, mode, s, len(ready), decided, currentHints)
	rep.Wrong = wrongHints(all, want, current)
	return want, rep
}

// perZone tabulates decided and present hints per zone, with the overload bound's minimum.
func perZone(zones []topology.Zone, mode string, s Settings, ready int, decided, present []string) []ZoneHints {
	var total int64
	for _, z := range zones {
		total += z.MilliCPU
	}
	out := make([]ZoneHints, 0, len(zones))
	for _, z := range zones {
		zh := ZoneHints{Zone: z.Name}
		if mode == modeAuto {
			zh.Minimum = topology.MinimumHinted(z.MilliCPU, total, ready, s.OverloadThreshold)
		}
		for _, h := range decided {
			if h == z.Name {
				zh.Decided++
			}
		}
		for _, h := range present {
			if h == z.Name {
				zh.InPlace++
			}
		}
		out = append(out, zh)
	}
	return out
}

func wrongHints(all []discoveryv1.Endpoint, want, current map[endpoints.Identity]*discoveryv1.EndpointHints) []WrongHint {
	var out []WrongHint
	for i := range all {
		id := endpoints.IdentityOf(&all[i])
		w, decided := want[id]
		have, listed := current[id]
		if !decided || !listed || endpoints.HintsEqual(have, w) {
			// Endpoints not yet in a slice are counted by placement as missing instead.
			continue
		}
		out = append(out, WrongHint{Address: all[i].Addresses[0], Zone: deref(all[i].Zone), Have: hintString(have), Want: hintString(w)})
	}
	return out
}

func hintString(h *discoveryv1.EndpointHints) string {
	if h == nil {
		return ""
	}
	var parts []string
	for _, z := range h.ForZones {
		parts = append(parts, z.Name)
	}
	for _, n := range h.ForNodes {
		parts = append(parts, "node "+n.Name)
	}
	return strings.Join(parts, "+")
}

func firstZone(h *discoveryv1.EndpointHints) string {
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

func trafficString(t topology.Traffic) string {
	return fmt.Sprintf("max %+.0f%% over fair share, %.0f%% served in-zone", 100*t.MaxOverload, 100*t.InZone)
}
