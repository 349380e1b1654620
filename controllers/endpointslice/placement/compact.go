package placement

import (
	"cmp"
	"slices"
	"sort"
)

// compaction is one way to remove r slices: a free slots in removal order,
// b untouched ones (the emptiest) and j untouched receivers.
type compaction struct {
	a, b, j int
	writes  int
	moved   int
}

// better orders compactions: fewest writes, then fewest pre-existing
// endpoints moved, then fewest untouched slices touched. Ties keep the
// earlier candidate, so the choice is deterministic.
func (c compaction) better(than compaction) bool {
	if c.writes != than.writes {
		return c.writes < than.writes
	}
	if c.moved != than.moved {
		return c.moved < than.moved
	}
	return c.b+c.j < than.b+than.j
}

// compact removes slices while the set has more than ceil(n/max)+Slack,
// choosing the removal with the fewest writes; see the package
// documentation for the cost model.
func (p *planner) compact() {
	n := len(p.order)
	if n == 0 {
		return
	}
	set := p.classify()
	// Compared this way round so that a huge Slack cannot overflow.
	excess := len(set.free) + len(set.untouched) - ceilDiv(n, p.max)
	if excess <= p.in.Slack {
		return
	}
	set.sortForRemoval()
	if best, found := p.bestCompaction(set, excess-p.in.Slack); found {
		p.applyCompaction(set.free, set.untouched, best)
	}
}

// slotSet sorts the live slots by what removing one costs: free ones are written
// anyway (created or updated), untouched ones would be written only for this.
type slotSet struct {
	free, untouched           []*slot
	created, updated, deleted int
}

func (p *planner) classify() slotSet {
	var set slotSet
	for _, s := range p.slots {
		switch {
		case s.gone:
			if s.existing != nil {
				set.deleted++
			}
		case s.existing == nil:
			set.created++
			set.free = append(set.free, s)
		case s.dirty:
			set.updated++
			set.free = append(set.free, s)
		default:
			set.untouched = append(set.untouched, s)
		}
	}
	return set
}

// sortForRemoval puts free slots in the order they are best removed in:
// fewest endpoints that would move first; among those, slices to create
// before existing ones, then the emptiest. Untouched slots go emptiest
// first: the first b are removed, the next j (the ones with the most room)
// receive.
func (set slotSet) sortForRemoval() {
	slices.SortStableFunc(set.free, func(x, y *slot) int {
		return cmp.Or(
			cmp.Compare(x.kept, y.kept),
			cmp.Compare(isExisting(x), isExisting(y)),
			cmp.Compare(len(x.entries), len(y.entries)),
			cmp.Compare(x.seq, y.seq),
		)
	})
	slices.SortStableFunc(set.untouched, func(x, y *slot) int {
		return cmp.Or(cmp.Compare(len(x.entries), len(y.entries)), cmp.Compare(x.seq, y.seq))
	})
}

// bestCompaction tries every split of the r removals between free slots (a)
// and untouched ones (b) and returns the cheapest.
func (p *planner) bestCompaction(set slotSet, r int) (compaction, bool) {
	free, untouched := set.free, set.untouched
	newRemoved := make([]int, len(free)+1)  // new slots among free[:a]
	keptRemoved := make([]int, len(free)+1) // pre-existing endpoints in free[:a]
	freeRoom := 0
	for i, s := range free {
		newRemoved[i+1] = newRemoved[i] + 1 - isExisting(s)
		keptRemoved[i+1] = keptRemoved[i] + s.kept
		freeRoom += s.room(p.max)
	}
	untouchedCount := make([]int, len(untouched)+1) // endpoints in untouched[:b]
	untouchedRoom := make([]int, len(untouched)+1)  // room in untouched[:k]
	for i, s := range untouched {
		untouchedCount[i+1] = untouchedCount[i] + len(s.entries)
		untouchedRoom[i+1] = untouchedRoom[i] + s.room(p.max)
	}
	var best compaction
	found := false
	for a := max(0, r-len(untouched)); a <= min(r, len(free)); a++ {
		b := r - a
		// Every removed free slot adds exactly max to what untouched slices
		// must absorb: its endpoints plus the room it no longer offers.
		deficit := a*p.max + untouchedCount[b] - freeRoom
		j := 0
		if deficit > 0 {
			candidates := len(untouched) - b
			j = sort.Search(candidates+1, func(k int) bool {
				return untouchedRoom[b+k]-untouchedRoom[b] >= deficit
			})
			if j > candidates {
				continue // impossible while bound*max >= n; kept for safety
			}
		}
		freeExistingRemoved := a - newRemoved[a]
		c := compaction{
			a: a, b: b, j: j,
			writes: writes(set.created-newRemoved[a], set.updated-freeExistingRemoved+j, set.deleted+freeExistingRemoved+b),
			moved:  keptRemoved[a] + untouchedCount[b],
		}
		if !found || c.better(best) {
			best, found = c, true
		}
	}
	return best, found
}

// applyCompaction removes the chosen slots and pours their endpoints into
// the remaining free slots (fullest first) and then the chosen untouched
// receivers (most room first).
func (p *planner) applyCompaction(free, untouched []*slot, c compaction) {
	removed := make([]*slot, 0, c.a+c.b)
	removed = append(removed, free[:c.a]...)
	removed = append(removed, untouched[:c.b]...)
	var relocate []entry
	for _, s := range removed {
		relocate = append(relocate, s.entries...)
		s.entries = nil
		s.gone = true
		if s.existing != nil {
			p.result.Compacted = append(p.result.Compacted, s.existing.Name)
		}
	}
	receivers := slices.Clone(free[c.a:])
	slices.SortStableFunc(receivers, func(x, y *slot) int {
		return cmp.Or(cmp.Compare(len(y.entries), len(x.entries)), cmp.Compare(x.seq, y.seq))
	})
	for _, s := range receivers {
		p.fill(s, &relocate)
	}
	for _, s := range untouched[c.b : c.b+c.j] {
		if p.fill(s, &relocate) {
			s.dirty = true
		}
	}
	// Unreachable by the capacity argument; never drop an endpoint anyway.
	for len(relocate) > 0 {
		p.fill(p.newSlot(), &relocate)
	}
	slices.Sort(p.result.Compacted)
}

// writes counts API writes, pairing creates with deletes into updates.
func writes(creates, updates, deletes int) int {
	return creates + updates + deletes - min(creates, deletes)
}

func isExisting(s *slot) int {
	if s.existing != nil {
		return 1
	}
	return 0
}
