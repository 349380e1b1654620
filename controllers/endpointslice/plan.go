package endpointslice

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/placement"
)

// syncPlan is every write one Service sync makes, in the order they are made.
type syncPlan struct {
	create, update, delete []*discoveryv1.EndpointSlice
	stats                  placement.Stats
	// compacted and adopted name slices merged away by compaction and taken over from upstream.
	compacted, adopted []string
	efficiency         efficiency
}

func (p *syncPlan) writes() int { return len(p.create) + len(p.update) + len(p.delete) }

// plan computes the writes for one Service: placement per slice set, placeholders for address
// types without endpoints, and reuse of slices that would be deleted for slices that would be
// created (one update instead of a create and a delete).
func (r *Reconciler) plan(svc *corev1.Service, desired endpoints.Result, existing []*discoveryv1.EndpointSlice) (*syncPlan, error) {
	p := &syncPlan{}
	wantLabels := sliceLabels(svc)
	needsUpdate := func(s *discoveryv1.EndpointSlice) bool { return !metadataCurrent(svc, wantLabels, s) }

	addressTypes := endpoints.AddressTypes(svc)
	bySet := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range existing {
		if s.Labels[discoveryv1.LabelManagedBy] != ManagedBy {
			p.adopted = append(p.adopted, s.Name)
		}
		if !slices.Contains(addressTypes, s.AddressType) {
			p.delete = append(p.delete, s)
			continue
		}
		key := endpoints.SliceKey(s)
		bySet[key] = append(bySet[key], s)
	}

	withEndpoints := map[discoveryv1.AddressType]bool{}
	for _, set := range desired.Sets {
		res := placement.Plan(placement.Input{
			Existing:    bySet[set.Key],
			Desired:     set.Endpoints,
			AddressType: set.AddressType,
			Ports:       set.Ports,
			MaxPerSlice: r.Options.MaxEndpointsPerSlice,
			Slack:       r.Options.CompactionSlack,
			NeedsUpdate: needsUpdate,
		})
		if res.Err != nil {
			// Options are validated at start-up; keep the slices as they are and say why.
			return nil, fmt.Errorf("planning slice set %s: %w", set.Key, res.Err)
		}
		p.add(res)
		p.efficiency.desired += len(set.Endpoints)
		p.efficiency.slices += len(bySet[set.Key]) + len(res.Create) - len(res.Delete)
		p.efficiency.idealSlices += ceilDiv(len(set.Endpoints), r.Options.MaxEndpointsPerSlice)
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
			p.delete = append(p.delete, leftovers[at]...)
			continue
		}
		p.placeholder(at, leftovers[at], needsUpdate)
		p.efficiency.slices++
		p.efficiency.idealSlices++
	}
	p.reuseDeletedForCreates()
	return p, nil
}

func (p *syncPlan) add(res placement.Result) {
	p.create = append(p.create, res.Create...)
	p.update = append(p.update, res.Update...)
	p.delete = append(p.delete, res.Delete...)
	p.compacted = append(p.compacted, res.Compacted...)
	p.stats.Desired += res.Stats.Desired
	p.stats.Added += res.Stats.Added
	p.stats.Removed += res.Stats.Removed
	p.stats.Changed += res.Stats.Changed
	p.stats.Moved += res.Stats.Moved
}

// placeholder keeps or makes the one empty slice of an address type without endpoints: an
// existing placeholder stays, otherwise a slice that would be deleted is emptied in place, and
// only when there is none is a new one created.
func (p *syncPlan) placeholder(at discoveryv1.AddressType, candidates []*discoveryv1.EndpointSlice, needsUpdate func(*discoveryv1.EndpointSlice) bool) {
	keep := slices.IndexFunc(candidates, func(s *discoveryv1.EndpointSlice) bool {
		return len(s.Endpoints) == 0 && len(s.Ports) == 0
	})
	if keep < 0 && len(candidates) > 0 {
		keep = 0
	}
	if keep < 0 {
		p.create = append(p.create, &discoveryv1.EndpointSlice{AddressType: at, Ports: []discoveryv1.EndpointPort{}, Endpoints: []discoveryv1.Endpoint{}})
		return
	}
	kept := candidates[keep]
	if len(kept.Endpoints) > 0 || len(kept.Ports) > 0 || needsUpdate(kept) {
		emptied := kept.DeepCopy()
		p.stats.Removed += len(emptied.Endpoints)
		emptied.Endpoints, emptied.Ports = []discoveryv1.Endpoint{}, []discoveryv1.EndpointPort{}
		p.update = append(p.update, emptied)
	}
	p.delete = append(p.delete, slices.Delete(slices.Clone(candidates), keep, keep+1)...)
}

// reuseDeletedForCreates turns each create into an update of a slice of the same address type that
// is about to be deleted, saving a write per pair. Placement already does this within a slice set;
// this catches moves between sets, such as every endpoint changing its port list.
func (p *syncPlan) reuseDeletedForCreates() {
	var remaining []*discoveryv1.EndpointSlice
	for _, c := range p.create {
		i := slices.IndexFunc(p.delete, func(d *discoveryv1.EndpointSlice) bool { return d.AddressType == c.AddressType })
		if i < 0 {
			remaining = append(remaining, c)
			continue
		}
		reused := p.delete[i].DeepCopy()
		reused.Endpoints, reused.Ports = c.Endpoints, c.Ports
		p.update = append(p.update, reused)
		p.delete = slices.Delete(p.delete, i, i+1)
	}
	p.create = remaining
}

// stampMetadata gives every slice about to be written its labels, owner and trigger time.
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
