package endpointslice

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/placement"
)

// syncPlan is every write one Service sync makes, in the order they are made, and what the sync
// reports about them.
type syncPlan struct {
	create, update, delete []*discoveryv1.EndpointSlice
	stats                  placement.Stats
	// compacted and adopted name slices merged away by compaction and taken over from upstream.
	compacted, adopted []string
	efficiency         efficiency
	// hints are the hint decisions per address type, for events and metrics.
	hints []hints.Decision
}

func (p *syncPlan) writes() int { return len(p.create) + len(p.update) + len(p.delete) }

// syncInput is everything one sync's plan depends on, read from the cluster beforehand.
type syncInput struct {
	svc      *corev1.Service
	desired  endpoints.Result
	existing []*discoveryv1.EndpointSlice
	// mode is svc's topology mode and zones the CPU shares Auto mode divides traffic by.
	mode  hints.Mode
	zones hints.Zones
	// trigger is the last-change-trigger-time to stamp on written slices (zero: none).
	trigger time.Time
}

// planSync computes every write of one sync in one pass: the hint decision per address type,
// then placement per slice set with those hints as input, placeholders for address types without
// endpoints, reuse of slices one set deletes for slices another creates (placement.Merge), and
// the metadata of every slice written. It reads nothing but its input and modifies none of it.
func planSync(in syncInput, opts Options) (*syncPlan, error) {
	p := &syncPlan{efficiency: efficiency{mode: in.mode, trafficDistribution: trafficDistributionLabel(in.svc, in.mode)}}
	wantLabels := sliceLabels(in.svc)
	needsUpdate := func(s *discoveryv1.EndpointSlice) bool { return !metadataCurrent(in.svc, wantLabels, s) }

	addressTypes := endpoints.AddressTypes(in.svc)
	bySet := map[string][]*discoveryv1.EndpointSlice{}
	var results []placement.Result
	var otherTypes placement.Result
	// By name, so that the plan does not depend on the order the cache lists the slices in (a
	// sync's creates land in any order, and so come back from the cache in any order).
	existing := slices.SortedFunc(slices.Values(in.existing), func(a, b *discoveryv1.EndpointSlice) int {
		return strings.Compare(a.Name, b.Name)
	})
	for _, s := range existing {
		if s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
			p.adopted = append(p.adopted, s.Name)
		}
		if !slices.Contains(addressTypes, s.AddressType) {
			otherTypes.Delete = append(otherTypes.Delete, s)
			continue
		}
		key := endpoints.SliceKey(s)
		bySet[key] = append(bySet[key], s)
	}
	results = append(results, otherTypes)

	hinted, decisions := hints.DecideService(hints.Service{
		Mode: in.mode, Zones: in.zones, Options: opts.Topology,
		AddressTypes: addressTypes, Desired: in.desired.Sets, Existing: bySet,
	})
	withEndpoints := map[discoveryv1.AddressType]bool{}
	for _, set := range in.desired.Sets {
		res := placement.Plan(placement.Input{
			Existing:    bySet[set.Key],
			Desired:     set.Endpoints,
			AddressType: set.AddressType,
			Ports:       set.Ports,
			MaxPerSlice: opts.MaxEndpointsPerSlice,
			Slack:       opts.CompactionSlack,
			NeedsUpdate: needsUpdate,
			Hints:       hinted[set.AddressType],
		})
		if res.Err != nil {
			// Options are validated at start-up; keep the slices as they are and say why.
			return nil, fmt.Errorf("planning slice set %s: %w", set.Key, res.Err)
		}
		results = append(results, res)
		p.efficiency.desired += len(set.Endpoints)
		p.efficiency.slices += len(bySet[set.Key]) + len(res.Create) - len(res.Delete)
		p.efficiency.idealSlices += ceilDiv(len(set.Endpoints), opts.MaxEndpointsPerSlice)
		withEndpoints[set.AddressType] = true
		delete(bySet, set.Key)
	}

	// Slices of port sets no longer desired go, except that an address type with no endpoints
	// keeps exactly one empty placeholder slice, as upstream does.
	leftovers := map[discoveryv1.AddressType][]*discoveryv1.EndpointSlice{}
	for _, key := range slices.Sorted(maps.Keys(bySet)) {
		for _, s := range bySet[key] {
			leftovers[s.AddressType] = append(leftovers[s.AddressType], s)
		}
	}
	for _, at := range addressTypes {
		if withEndpoints[at] {
			results = append(results, placement.Result{Delete: leftovers[at]})
			continue
		}
		results = append(results, placeholder(at, leftovers[at], needsUpdate))
		p.efficiency.slices++
		p.efficiency.idealSlices++
	}

	merged := placement.Merge(results...)
	p.create, p.update, p.delete = merged.Create, merged.Update, merged.Delete
	p.stats, p.compacted = merged.Stats, merged.Compacted
	p.hints = decisions
	p.stampMetadata(in.svc, in.trigger)
	return p, nil
}

// placeholder keeps or makes the one empty slice of an address type without endpoints: an
// existing placeholder stays, otherwise a slice that would be deleted is emptied in place, and
// only when there is none is a new one created.
func placeholder(at discoveryv1.AddressType, candidates []*discoveryv1.EndpointSlice, needsUpdate func(*discoveryv1.EndpointSlice) bool) placement.Result {
	var r placement.Result
	keep := slices.IndexFunc(candidates, func(s *discoveryv1.EndpointSlice) bool {
		return len(s.Endpoints) == 0 && len(s.Ports) == 0
	})
	if keep < 0 && len(candidates) > 0 {
		keep = 0
	}
	if keep < 0 {
		r.Create = append(r.Create, &discoveryv1.EndpointSlice{AddressType: at, Ports: []discoveryv1.EndpointPort{}, Endpoints: []discoveryv1.Endpoint{}})
		return r
	}
	kept := candidates[keep]
	if len(kept.Endpoints) > 0 || len(kept.Ports) > 0 || needsUpdate(kept) {
		emptied := kept.DeepCopy()
		r.Stats.Removed += len(emptied.Endpoints)
		emptied.Endpoints, emptied.Ports = []discoveryv1.Endpoint{}, []discoveryv1.EndpointPort{}
		r.Update = append(r.Update, emptied)
	}
	r.Delete = slices.Delete(slices.Clone(candidates), keep, keep+1)
	return r
}

// stampMetadata gives every slice about to be written its labels, owner and trigger time. Only
// objects the plan itself made are stamped: creates and the copies placement returns as updates.
func (p *syncPlan) stampMetadata(svc *corev1.Service, trigger time.Time) {
	wantLabels := sliceLabels(svc)
	annotation, hasTrigger := endpoints.TriggerTimeAnnotation(trigger)
	owner := *metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))
	stamp := func(s *discoveryv1.EndpointSlice) {
		s.Labels = maps.Clone(wantLabels)
		if hasTrigger {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[corev1.EndpointsLastChangeTriggerTime] = annotation
		} else {
			delete(s.Annotations, corev1.EndpointsLastChangeTriggerTime)
		}
		s.OwnerReferences = []metav1.OwnerReference{owner}
	}
	for _, s := range p.create {
		s.Namespace = svc.Namespace
		s.GenerateName = svc.Name + "-"
		stamp(s)
	}
	for _, s := range p.update {
		stamp(s)
	}
}

// trafficDistributionLabel is the traffic_distribution label of upstream's per-sync metric: the
// Service's trafficDistribution when it is one this controller honours and the topology-mode
// annotation does not override it, otherwise empty.
func trafficDistributionLabel(svc *corev1.Service, mode hints.Mode) string {
	if mode == hints.PreferSameZone || mode == hints.PreferSameNode {
		return *svc.Spec.TrafficDistribution
	}
	return ""
}

// sliceLabels are the labels every slice of svc carries: the Service's own labels mirrored, then
// the ones this controller owns, which a Service label cannot override.
func sliceLabels(svc *corev1.Service) map[string]string {
	out := make(map[string]string, len(svc.Labels)+3)
	for k, v := range svc.Labels {
		switch k {
		case discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy, corev1.IsHeadlessService:
			continue
		}
		out[k] = v
	}
	out[discoveryv1.LabelServiceName] = svc.Name
	out[discoveryv1.LabelManagedBy] = ManagedBy
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		out[corev1.IsHeadlessService] = ""
	}
	return out
}

// metadataCurrent reports whether a slice already carries the labels and owner it should.
func metadataCurrent(svc *corev1.Service, wantLabels map[string]string, s *discoveryv1.EndpointSlice) bool {
	if !maps.Equal(s.Labels, wantLabels) || len(s.OwnerReferences) != 1 {
		return false
	}
	ref := s.OwnerReferences[0]
	return ref.UID == svc.UID && ref.Controller != nil && *ref.Controller && ref.Kind == "Service"
}

func ceilDiv(n, d int) int { return (n + d - 1) / d }
