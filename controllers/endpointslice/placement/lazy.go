package placement

import (
	"cmp"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// reuseExisting is step 1 of the lazy phase: keep every still-desired
// endpoint in the slice it is in, replace changed ones in place, drop the
// rest, and collect what is left to place in p.pool.
func (p *planner) reuseExisting() {
	placed := make([]bool, len(p.in.Desired))
	for si, s := range p.slots {
		s.dirty = p.in.NeedsUpdate != nil && p.in.NeedsUpdate(s.existing)
		s.entries = make([]entry, 0, len(s.existing.Endpoints))
		for j := range s.existing.Endpoints {
			ep := &s.existing.Endpoints[j]
			id := endpoints.IdentityOf(ep)
			di, desired := p.index[id]
			if !desired || placed[di] {
				p.result.Stats.Removed++
				s.dirty = true
				continue
			}
			placed[di] = true
			p.origin[di] = int32(si)
			hints, decided := p.in.Hints[id]
			if !decided {
				hints = ep.Hints
			}
			switch want := &p.in.Desired[di]; {
			case !endpoints.EndpointsEqual(*ep, *want):
				merged := *want
				merged.Hints = hints
				ep = &merged
				p.result.Stats.Changed++
				s.dirty = true
			case !endpoints.HintsEqual(ep.Hints, hints):
				rehinted := *ep
				rehinted.Hints = hints
				ep = &rehinted
				p.result.Stats.Rehinted++
				s.dirty = true
			}
			s.entries = append(s.entries, entry{ep: ep, desired: di})
		}
		// A slice over the limit (the limit was lowered) must shrink; its
		// tail is placed again like new endpoints.
		if len(s.entries) > p.max {
			p.pool = append(p.pool, s.entries[p.max:]...)
			s.entries = s.entries[:p.max]
			s.dirty = true
			p.result.Trimmed = append(p.result.Trimmed, s.name())
		}
		s.kept = len(s.entries)
	}
	for _, di := range p.order {
		if !placed[di] {
			p.pool = append(p.pool, entry{ep: p.newEndpoint(di), desired: di})
			p.result.Stats.Added++
		}
	}
	// Input order, so new slices come out sorted the way Desired is.
	slices.SortFunc(p.pool, func(a, b entry) int { return cmp.Compare(a.desired, b.desired) })
}

// newEndpoint is desired endpoint di as a new endpoint is written: with the
// hints Input.Hints decides for it, if any.
func (p *planner) newEndpoint(di int32) *discoveryv1.Endpoint {
	ep := &p.in.Desired[di]
	if len(p.in.Hints) == 0 {
		return ep
	}
	hints, decided := p.in.Hints[endpoints.IdentityOf(ep)]
	if !decided || endpoints.HintsEqual(ep.Hints, hints) {
		return ep
	}
	hinted := *ep
	hinted.Hints = hints
	return &hinted
}

// placeNew is steps 2 and 3 of the lazy phase: put the pool into slices
// written anyway, then into the one untouched slice it fits best, then into
// fresh slices, reusing emptied ones first. Emptied slices left over are
// deleted.
func (p *planner) placeNew() {
	var dirty, untouched, emptied []*slot
	for _, s := range p.slots {
		switch {
		case len(s.entries) == 0:
			emptied = append(emptied, s)
		case s.dirty:
			dirty = append(dirty, s)
		default:
			untouched = append(untouched, s)
		}
	}
	slices.SortStableFunc(dirty, func(a, b *slot) int { return cmp.Compare(len(b.entries), len(a.entries)) })
	for _, s := range dirty {
		if len(p.pool) == 0 {
			break
		}
		p.fill(s, &p.pool)
	}
	for len(p.pool) > 0 {
		if len(p.pool) < p.max {
			if s := closestToFull(untouched, len(p.pool), p.max); s != nil {
				p.fill(s, &p.pool)
				s.dirty = true
				continue
			}
		}
		var s *slot
		if len(emptied) > 0 {
			s, emptied = emptied[0], emptied[1:]
			s.dirty = true
		} else {
			s = p.newSlot()
		}
		p.fill(s, &p.pool)
	}
	for _, s := range emptied {
		s.gone = true
	}
}

// closestToFull returns the first of slots that n more endpoints fill most
// completely without overflowing it, or nil if none can take them all.
func closestToFull(slots []*slot, n, limit int) *slot {
	var best *slot
	bestRoom := limit
	for _, s := range slots {
		room := s.room(limit) - n
		if room >= 0 && room < bestRoom {
			best, bestRoom = s, room
			if room == 0 {
				break
			}
		}
	}
	return best
}
