package explain

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/topology"
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

// hintInputs is what explainHints decides from, chosen as the controller's sync chooses it.
type hintInputs struct {
	mode     hints.Mode
	zones    hints.Zones
	settings Settings
	// svc, sets and bySet are the Service, its desired slice sets and fleetslice's slices by set
	// key, from which hints.Service takes each endpoint's current hints as the controller does.
	svc   *corev1.Service
	sets  []endpoints.Set
	bySet map[string][]*discoveryv1.EndpointSlice
}

// explainHints runs the controller's hint decision (hints.Service, hints.Decide) per address
// type with endpoints and reports it; an address type without endpoints keeps a placeholder slice
// and has nothing to hint.
func explainHints(in hintInputs) hintResult {
	out := hintResult{want: map[discoveryv1.AddressType]map[endpoints.Identity]*discoveryv1.EndpointHints{}, ready: map[string]int{}}
	listed := map[endpoints.Identity]bool{}
	for _, group := range in.bySet {
		for _, sl := range group {
			for i := range sl.Endpoints {
				listed[endpoints.IdentityOf(&sl.Endpoints[i])] = true
			}
		}
	}
	svc := hints.Service{
		Mode: in.mode, Zones: in.zones,
		Options:      topology.Options{OverloadThreshold: in.settings.OverloadThreshold, MinEndpointsPerZone: in.settings.MinEndpointsPerZone},
		AddressTypes: endpoints.AddressTypes(in.svc), Desired: in.sets, Existing: in.bySet,
	}
	for _, typeIn := range svc.Inputs() {
		if len(typeIn.Endpoints) == 0 {
			continue
		}
		want, d := hints.Decide(typeIn)
		rep := hintReport(typeIn, want, d, in.zones.Zones, in.settings)
		rep.Wrong = wrongHints(typeIn.Endpoints, want, listed)
		for _, e := range hints.Ready(typeIn.Endpoints) {
			out.ready[deref(e.Endpoint.Zone)]++
		}
		out.want[d.AddressType], out.reports = want, append(out.reports, rep)
	}
	return out
}

// hintReport words one address type's decision: the expected traffic under the decided and the
// present hints, over the ready endpoints in the order the allocator sees them.
func hintReport(in hints.Input, want map[endpoints.Identity]*discoveryv1.EndpointHints, d hints.Decision,
	zones []topology.Zone, s Settings) HintReport {
	ready := hints.Ready(in.Endpoints)
	alloc, _ := hints.Allocation(ready)
	present := make([]string, len(alloc))
	for i := range alloc {
		present[i] = alloc[i].Hint
	}
	var decided []string
	if d.Enabled {
		decided = make([]string, len(ready))
		for i, e := range ready {
			decided[i] = hints.FirstZone(want[e.ID])
		}
	}
	return HintReport{
		AddressType: d.AddressType, Ready: len(ready), Enabled: d.Enabled, Reason: d.Reason, Message: d.Message,
		PerZone: perZone(zones, in.Mode, s, len(ready), decided, present),
		Decided: topology.ExpectedTraffic(zones, alloc, decided),
		Current: topology.ExpectedTraffic(zones, alloc, present),
	}
}

// perZone tabulates decided and present hints per zone, with the overload bound's minimum.
func perZone(zones []topology.Zone, mode hints.Mode, s Settings, ready int, decided, present []string) []ZoneHints {
	var total int64
	for _, z := range zones {
		total += z.MilliCPU
	}
	out := make([]ZoneHints, 0, len(zones))
	for _, z := range zones {
		zh := ZoneHints{Zone: z.Name}
		if mode == hints.Auto {
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

// wrongHints lists the endpoints listed in a slice whose hints there (the copy the controller
// keeps) differ from the decision.
func wrongHints(eps []hints.Endpoint, want map[endpoints.Identity]*discoveryv1.EndpointHints, listed map[endpoints.Identity]bool) []WrongHint {
	var out []WrongHint
	for _, e := range eps {
		w, decided := want[e.ID]
		if !decided || !listed[e.ID] || endpoints.HintsEqual(e.Current, w) {
			// Endpoints not yet in a slice are counted by placement as missing instead.
			continue
		}
		out = append(out, WrongHint{Address: e.Endpoint.Addresses[0], Zone: deref(e.Endpoint.Zone), Have: hintString(e.Current), Want: hintString(w)})
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

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func trafficString(t topology.Traffic) string {
	return fmt.Sprintf("max %+.0f%% over fair share, %.0f%% served in-zone", 100*t.MaxOverload, 100*t.InZone)
}
