// Package explain says why a Service's EndpointSlices, zone hints and cross-cluster allocation
// are what they are. It takes the objects fleetslice's controllers read (gathered from a live
// cluster by gather.go, or built by a test), re-runs the controllers' own pure decision
// functions on them (packages controllers/topology, controllers/endpointslice/selection, hints,
// endpoints and placement, controllers/multicluster/locality and importplan) and reports the inputs, the
// decision and whether the objects in the cluster match it. It decides nothing itself: what it
// adds is only the choice of inputs and the wording, so an answer cannot drift from what the
// controllers do.
package explain

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/placement"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/selection"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// ServiceInputs is what the EndpointSlice controller reads for one Service, and its settings.
type ServiceInputs struct {
	Service *corev1.Service
	// Pods are the Pods of the Service's namespace; explain selects them as the controller does.
	Pods  []*corev1.Pod
	Nodes []*corev1.Node
	// Slices are the EndpointSlices labelled with the Service's name, whoever manages them.
	Slices   []*discoveryv1.EndpointSlice
	Settings Settings
}

// ServiceReport is the explanation of one Service.
type ServiceReport struct {
	Namespace, Name string
	Settings        Settings
	// Selection says which Pods back the slices, or why fleetslice writes none.
	Selection string
	Served    bool
	// SelectionIgnored names an annotation the controller does not honour, as its Warning
	// event does; empty when there is none.
	SelectionIgnored string
	// Pods counts the namespace's Pods; Selected those the selector picks.
	Pods, Selected int
	// PodsOnUnknownNodes are left out until their Node is known, as the controller does.
	PodsOnUnknownNodes []string
	// Mode is the topology mode and ModeSource what set it.
	Mode       hints.Mode
	ModeSource string
	// Zones are the zones hints divide traffic between, with ZoneReason when there are none.
	Zones                   []ZoneInput
	ZoneReason, ZoneMessage string
	Hints                   []HintReport
	Sets                    []SetReport
	// Foreign lists the slices another controller manages, as "name (managed-by)".
	Foreign []string
	// Differences says where the cluster does not match the decision; empty when it does.
	Differences []string
}

// ZoneInput is one zone as the hint allocator sees it.
type ZoneInput struct {
	Name     string
	MilliCPU int64
	// Share is the zone's share of the worker CPU, hence of the Service's traffic.
	Share float64
	// Ready counts the Service's ready endpoints running there.
	Ready int
}

// SetReport is one slice set (an address type and port list) and the placement plan for it.
type SetReport struct {
	AddressType discoveryv1.AddressType
	Ports       string
	Desired     int
	// Slices counts fleetslice's slices of the set now; Ideal is ceil(Desired/max) and Bound
	// the count above which compaction merges slices (Ideal + slack).
	Slices, Ideal, Bound int
	// Plan is what the controller's placement would write from here; no writes means the
	// slices already hold exactly the desired endpoints and hints.
	Plan placement.Result
}

// ExplainService runs the EndpointSlice controller's decisions on in.
func ExplainService(in ServiceInputs) ServiceReport {
	svc := in.Service
	r := ServiceReport{Namespace: svc.Namespace, Name: svc.Name, Settings: in.Settings, Pods: len(in.Pods)}
	sel, err := selection.Of(svc, in.Settings.Services)
	r.Selection, r.Served, r.SelectionIgnored = selectionWhy(svc, in.Settings.Services, sel, err), sel.Selector != nil, sel.Ignored
	r.Mode, r.ModeSource = hints.ModeOf(svc)

	nodes := map[string]*corev1.Node{}
	for _, n := range in.Nodes {
		nodes[n.Name] = n
	}
	// Zones from the Nodes in the order given, so the reason names the same Node every run;
	// shown in every mode, used by the decision in Auto mode only, as hints.ZonesFor.
	zones := hints.ZonesOf(in.Nodes)
	r.ZoneReason, r.ZoneMessage = string(zones.Reason), zones.Message

	var ours []*discoveryv1.EndpointSlice
	for _, s := range in.Slices {
		if m := s.Labels[discoveryv1.LabelManagedBy]; m != selection.ManagedBy {
			r.Foreign = append(r.Foreign, fmt.Sprintf("%s (%s)", s.Name, m))
			continue
		}
		ours = append(ours, s)
	}
	if !r.Served {
		switch {
		case err != nil:
			// The controller's sync stops at the annotation (a Warning event, syncs_total{result=invalid})
			// and deliberately leaves the slices: they are stale, not leftovers to delete.
			r.Differences = append(r.Differences, fmt.Sprintf("every sync stops until annotation %s is fixed; the %d slices of fleetslice's stay as they are meanwhile", selection.Annotation, len(ours)))
		case len(ours) > 0:
			r.Differences = append(r.Differences, fmt.Sprintf("%d slices of fleetslice's remain although it serves no endpoints for this Service", len(ours)))
		}
		return r
	}
	var pods []*corev1.Pod
	for _, p := range in.Pods {
		if sel.Selector.Matches(labels.Set(p.Labels)) {
			pods = append(pods, p)
		}
	}
	r.Selected = len(pods)
	desired := endpoints.Build(svc, endpoints.PodsOf(pods), nodes)
	r.PodsOnUnknownNodes = desired.PodsOnUnknownNodes

	bySet := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range ours {
		key := endpoints.SliceKey(s)
		bySet[key] = append(bySet[key], s)
	}
	decided := explainHints(hintInputs{mode: r.Mode, zones: zones, settings: in.Settings, svc: svc, sets: desired.Sets, bySet: bySet})
	r.Hints = decided.reports
	r.Zones = zoneInputs(zones.Zones, decided.ready)
	r.planSets(desired.Sets, bySet, decided.want, in.Settings)
	r.placeholders(svc, desired.Sets, bySet)
	r.compareHints()
	return r
}

// selectionWhy words the controller's selection (selection.Of) for a person: which Pods back the
// slices, or why fleetslice writes none.
func selectionWhy(svc *corev1.Service, scope selection.Scope, sel selection.Selection, err error) string {
	if err != nil {
		return fmt.Sprintf("%v, so the controller keeps the slices as they are", err)
	}
	switch sel.Basis {
	case selection.ExternalName:
		return "an ExternalName Service has no endpoints"
	case selection.LeftToUpstream:
		return fmt.Sprintf("the manager runs with --endpointslice-services=%s and the Service has spec.selector, so kube-controller-manager serves it", scope)
	case selection.SpecSelector:
		return "spec.selector " + labels.Set(svc.Spec.Selector).String()
	case selection.Annotated:
		return fmt.Sprintf("annotation %s=%s", selection.Annotation, svc.Annotations[selection.Annotation])
	}
	return fmt.Sprintf("the Service has neither spec.selector nor annotation %s, so its slices are written by hand", selection.Annotation)
}

// planSets runs placement for each desired set, as a sync would, and notes every write it asks
// for: a sync in which nothing changed writes nothing, so any write is a difference.
func (r *ServiceReport) planSets(sets []endpoints.Set, bySet map[string][]*discoveryv1.EndpointSlice,
	want map[discoveryv1.AddressType]map[endpoints.Identity]*discoveryv1.EndpointHints, s Settings) {
	for _, set := range sets {
		existing := slices.Clone(bySet[set.Key])
		sort.Slice(existing, func(i, j int) bool { return existing[i].Name < existing[j].Name })
		delete(bySet, set.Key)
		rep := SetReport{AddressType: set.AddressType, Ports: portsString(set.Ports), Desired: len(set.Endpoints), Slices: len(existing)}
		if s.MaxEndpointsPerSlice > 0 {
			rep.Ideal = (len(set.Endpoints) + s.MaxEndpointsPerSlice - 1) / s.MaxEndpointsPerSlice
		}
		rep.Bound = rep.Ideal + s.CompactionSlack
		rep.Plan = placement.Plan(placement.Input{
			Existing: existing, Desired: set.Endpoints, AddressType: set.AddressType, Ports: set.Ports,
			MaxPerSlice: s.MaxEndpointsPerSlice, Slack: s.CompactionSlack, Hints: want[set.AddressType],
		})
		r.Sets = append(r.Sets, rep)
		if rep.Plan.Err != nil {
			r.Differences = append(r.Differences, fmt.Sprintf("%s %s: cannot plan with these settings: %v", set.AddressType, rep.Ports, rep.Plan.Err))
			continue
		}
		if d := planDifference(rep); d != "" {
			r.Differences = append(r.Differences, d)
		}
	}
}

// placeholders accounts for the slices of no desired set: an address type without endpoints
// keeps exactly one empty slice, as upstream does; everything else is deleted by the next sync.
func (r *ServiceReport) placeholders(svc *corev1.Service, sets []endpoints.Set, left map[string][]*discoveryv1.EndpointSlice) {
	withEndpoints := map[discoveryv1.AddressType]bool{}
	for _, set := range sets {
		withEndpoints[set.AddressType] = true
	}
	byType := map[discoveryv1.AddressType]int{}
	for _, group := range left {
		for _, s := range group {
			byType[s.AddressType]++
		}
	}
	for _, at := range endpoints.AddressTypes(svc) {
		switch n := byType[at]; {
		case withEndpoints[at] && n > 0:
			r.Differences = append(r.Differences, fmt.Sprintf("%d %s slices list ports no endpoint has now; the next sync deletes them", n, at))
		case !withEndpoints[at] && n == 0:
			r.Differences = append(r.Differences, fmt.Sprintf("no %s endpoints and no placeholder slice; the next sync creates one", at))
		case !withEndpoints[at] && n > 1:
			r.Differences = append(r.Differences, fmt.Sprintf("no %s endpoints but %d slices; the next sync keeps one placeholder", at, n))
		}
		delete(byType, at)
	}
	for at, n := range byType {
		r.Differences = append(r.Differences, fmt.Sprintf("%d slices of address type %s, which the Service no longer has; the next sync deletes them", n, at))
	}
}

// planDifference words the writes placement asks for, "" when there are none.
func planDifference(rep SetReport) string {
	p := rep.Plan
	if p.Writes() == 0 {
		return ""
	}
	var what []string
	add := func(n int, format string) {
		if n > 0 {
			what = append(what, fmt.Sprintf(format, n))
		}
	}
	add(p.Stats.Added, "%d desired endpoints missing from the slices")
	add(p.Stats.Removed, "%d listed endpoints no longer desired")
	add(p.Stats.Changed, "%d endpoints with stale content")
	add(p.Stats.Rehinted, "%d endpoints with other hints than decided")
	add(len(p.Compacted), "%d slices over the bound to merge away")
	add(len(p.Trimmed), "%d slices over the maximum size")
	if len(what) == 0 {
		what = append(what, "slices to rewrite")
	}
	return fmt.Sprintf("%s %s: the next sync makes %d writes (%d creates, %d updates, %d deletes): %s",
		rep.AddressType, rep.Ports, p.Writes(), len(p.Create), len(p.Update), len(p.Delete), strings.Join(what, ", "))
}

// compareHints notes every endpoint whose hint in the cluster is not the decided one.
func (r *ServiceReport) compareHints() {
	for _, h := range r.Hints {
		if len(h.Wrong) == 0 {
			continue
		}
		shown := make([]string, 0, 3)
		for _, w := range h.Wrong[:min(3, len(h.Wrong))] {
			shown = append(shown, fmt.Sprintf("%s (zone %s) is hinted for %s, decided %s", w.Address, orNone(w.Zone), orNone(w.Have), orNone(w.Want)))
		}
		more := ""
		if len(h.Wrong) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(h.Wrong)-len(shown))
		}
		r.Differences = append(r.Differences, fmt.Sprintf("%s: %d endpoints carry other hints than decided: %s%s",
			h.AddressType, len(h.Wrong), strings.Join(shown, "; "), more))
	}
}

func zoneInputs(zones []topology.Zone, ready map[string]int) []ZoneInput {
	var total int64
	for _, z := range zones {
		total += z.MilliCPU
	}
	out := make([]ZoneInput, 0, len(zones))
	for _, z := range zones {
		in := ZoneInput{Name: z.Name, MilliCPU: z.MilliCPU, Ready: ready[z.Name]}
		if total > 0 {
			in.Share = float64(z.MilliCPU) / float64(total)
		}
		out = append(out, in)
	}
	return out
}

func portsString(ports []discoveryv1.EndpointPort) string {
	if len(ports) == 0 {
		return "(no ports)"
	}
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		s := ""
		if p.Name != nil && *p.Name != "" {
			s = *p.Name + ":"
		}
		if p.Port != nil {
			s += fmt.Sprint(*p.Port)
		}
		if p.Protocol != nil {
			s += "/" + string(*p.Protocol)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
