package placement

import (
	"cmp"
	"errors"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// build turns the planned slots into API objects. A slice to create and a
// slice to delete become one update of the deleted slice (its name is
// reused): one write instead of two, and consumers see one change.
func (p *planner) build() Result {
	r := p.result
	var creates []*slot
	var deletes []*discoveryv1.EndpointSlice
	for _, s := range p.slots {
		switch {
		case s.gone:
			if s.existing != nil {
				deletes = append(deletes, s.existing)
			}
		case s.existing == nil:
			creates = append(creates, s)
		case s.dirty:
			r.Update = append(r.Update, p.updateOf(s.existing, s))
		}
	}
	for len(creates) > 0 && len(deletes) > 0 {
		r.Update = append(r.Update, p.updateOf(deletes[0], creates[0]))
		creates, deletes = creates[1:], deletes[1:]
	}
	for _, s := range creates {
		r.Create = append(r.Create, &discoveryv1.EndpointSlice{
			AddressType: p.in.AddressType,
			Ports:       copyPorts(p.in.Ports),
			Endpoints:   p.materialize(s, ""),
		})
	}
	r.Delete = deletes
	slices.SortFunc(r.Update, byName)
	r.Stats.Moved = p.moved
	return r
}

// updateOf returns a deep copy of base holding s's endpoints. base is never
// modified, and its endpoints are not copied only to be thrown away.
func (p *planner) updateOf(base *discoveryv1.EndpointSlice, s *slot) *discoveryv1.EndpointSlice {
	shallow := *base
	shallow.Endpoints = nil
	out := shallow.DeepCopy()
	out.Endpoints = p.materialize(s, out.Name)
	return out
}

// materialize deep-copies s's endpoints for a slice named name ("" for a new
// slice), counting those that came from a differently named slice.
func (p *planner) materialize(s *slot, name string) []discoveryv1.Endpoint {
	out := make([]discoveryv1.Endpoint, len(s.entries))
	for i, e := range s.entries {
		e.ep.DeepCopyInto(&out[i])
		if o := p.origin[e.desired]; o >= 0 && p.slots[o].name() != name {
			p.moved++
		}
	}
	return out
}

func copyPorts(ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ports))
	for i := range ports {
		ports[i].DeepCopyInto(&out[i])
	}
	return out
}

func byName(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) }

// Merge combines the results of one Service's slice sets and turns each
// create into an update of a slice of the same address type that another set
// deletes, as upstream does when a rollout changes a Service's ports: one
// write instead of two. The caller may add its placeholder create or delete
// as a Result of its own. Merge takes ownership of the objects in results
// (only the deleted slices are input objects, and those it never modifies).
func Merge(results ...Result) Result {
	var out Result
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
		out.Create = append(out.Create, r.Create...)
		out.Update = append(out.Update, r.Update...)
		out.Delete = append(out.Delete, r.Delete...)
		out.Compacted = append(out.Compacted, r.Compacted...)
		out.Trimmed = append(out.Trimmed, r.Trimmed...)
		out.Ignored = append(out.Ignored, r.Ignored...)
		out.Stats = addStats(out.Stats, r.Stats)
	}
	out.Err = errors.Join(errs...)
	slices.SortStableFunc(out.Delete, byName)
	creates := out.Create
	out.Create = nil
	for _, c := range creates {
		i := slices.IndexFunc(out.Delete, func(d *discoveryv1.EndpointSlice) bool { return d.AddressType == c.AddressType })
		if i < 0 {
			out.Create = append(out.Create, c)
			continue
		}
		shallow := *out.Delete[i]
		shallow.Endpoints, shallow.Ports = nil, nil
		reused := shallow.DeepCopy()
		reused.Ports, reused.Endpoints = c.Ports, c.Endpoints
		out.Update = append(out.Update, reused)
		out.Delete = slices.Delete(out.Delete, i, i+1)
	}
	slices.SortStableFunc(out.Update, byName)
	return out
}

func addStats(a, b Stats) Stats {
	return Stats{
		Desired:          a.Desired + b.Desired,
		Added:            a.Added + b.Added,
		Removed:          a.Removed + b.Removed,
		Changed:          a.Changed + b.Changed,
		Rehinted:         a.Rehinted + b.Rehinted,
		Moved:            a.Moved + b.Moved,
		InvalidDesired:   a.InvalidDesired + b.InvalidDesired,
		DuplicateDesired: a.DuplicateDesired + b.DuplicateDesired,
	}
}
