package placement

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestPlanCompaction(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want want
	}{{
		name: "within the bound nothing is merged",
		in: input(100, 2, slices.Concat(eps(0, 30), eps(100, 130), eps(200, 230)),
			slice("a", eps(0, 30)...), slice("b", eps(100, 130)...), slice("c", eps(200, 230)...)),
		want: want{create: []int{}, update: []string{}, delete: []string{}},
	}, {
		name: "untouched fragments merge into the one with the most room",
		in: input(100, 0, slices.Concat(eps(0, 30), eps(100, 31+100), eps(200, 232), eps(300, 333)),
			slice("a", eps(0, 30)...), slice("b", eps(100, 131)...), slice("c", eps(200, 232)...), slice("d", eps(300, 333)...)),
		// 126 endpoints: 2 slices. Removing a and b (the emptiest) and
		// pouring their 61 endpoints into c costs 3 writes.
		want: want{update: []string{"c"}, delete: []string{"a", "b"}, after: map[string][]string{
			"c": slices.Concat(pods(200, 232), pods(0, 30), pods(100, 131)), "d": pods(300, 333)}},
	}, {
		name: "a slice being written anyway is merged away before an untouched one",
		in: input(100, 0, slices.Concat(eps(0, 30), eps(100, 160), eps(200, 260)),
			slice("a", eps(0, 31)...), slice("b", eps(100, 160)...), slice("c", eps(200, 260)...)),
		// a is updated anyway (p30 left). Deleting a instead costs the
		// same two writes as deleting b but moves 30 endpoints, not 60.
		want: want{update: []string{"b"}, delete: []string{"a"}, after: map[string][]string{
			"b": slices.Concat(pods(100, 160), pods(0, 30)), "c": pods(200, 260)},
			stats: &Stats{Desired: 150, Removed: 1, Moved: 30}},
	}, {
		name: "a small new slice is dropped and its endpoints spread",
		in: input(100, 0, slices.Concat(eps(0, 95), eps(100, 195), eps(300, 308)),
			slice("a", eps(0, 95)...), slice("b", eps(100, 195)...)),
		// The lazy phase would create a third slice of 8; with slack 0 the
		// cheapest fix is two updates and no endpoint moves.
		want: want{create: []int{}, update: []string{"a", "b"}, delete: []string{}, after: map[string][]string{
			"a": append(pods(0, 95), pods(300, 305)...), "b": append(pods(100, 195), pods(305, 308)...)},
			stats: &Stats{Desired: 198, Added: 8}},
	}, {
		name: "slack allows the small new slice",
		in: input(100, 1, slices.Concat(eps(0, 95), eps(100, 195), eps(300, 308)),
			slice("a", eps(0, 95)...), slice("b", eps(100, 195)...)),
		want: want{create: []int{8}, update: []string{}, delete: []string{}},
	}, {
		name: "a larger maximum lets a sync without changes compact once",
		in: input(10, 0, eps(0, 20),
			slice("a", eps(0, 5)...), slice("b", eps(5, 10)...), slice("c", eps(10, 15)...), slice("d", eps(15, 20)...)),
		want: want{update: []string{"c", "d"}, delete: []string{"a", "b"}},
	}, {
		name: "everything removed but one endpoint leaves one slice",
		in: input(10, 0, eps(0, 1),
			slice("a", eps(0, 10)...), slice("b", eps(10, 20)...), slice("c", eps(20, 30)...)),
		want: want{update: []string{"a"}, delete: []string{"b", "c"}, after: map[string][]string{"a": {"p0"}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(tc.in.Existing...)
			r := planAndCheck(t, c, tc.in)
			tc.want.check(t, r, c)
		})
	}
}

// layoutSlot is a slot of the lazy layout as the brute force sees it.
type layoutSlot struct {
	size, kept    int
	isNew, dirty  bool
	wasGoneBefore bool
}

// FuzzCompactionIsOptimal checks compaction against exhaustive search: over
// every way of removing the required number of slices (each followed by the
// cheapest receivers), none needs fewer writes than Plan's result, and none
// with as few writes moves fewer pre-existing endpoints.
func FuzzCompactionIsOptimal(f *testing.F) {
	for seed := range uint64(64) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 7))
		in := randomLayoutInput(rng)
		p := newPlanner(in)
		p.reuseExisting()
		p.placeNew()
		var lazy []layoutSlot
		for _, s := range p.slots {
			lazy = append(lazy, layoutSlot{size: len(s.entries), kept: s.kept, isNew: s.existing == nil, dirty: s.dirty, wasGoneBefore: s.gone})
		}
		p.compact()
		movedByPlan := 0
		for i, s := range p.slots[:len(lazy)] {
			if s.gone && !lazy[i].wasGoneBefore {
				movedByPlan += lazy[i].kept
			}
		}
		r := p.build()
		bestWrites, bestMoved := bruteForce(lazy, len(p.order), in.MaxPerSlice, in.Slack)
		if r.Writes() != bestWrites || movedByPlan != bestMoved {
			t.Fatalf("plan: %d writes, %d moved; exhaustive search: %d writes, %d moved; layout %+v max %d slack %d",
				r.Writes(), movedByPlan, bestWrites, bestMoved, lazy, in.MaxPerSlice, in.Slack)
		}
	})
}

// bruteForce returns the fewest writes, and the fewest moved endpoints at
// that cost, over every set of slices compaction could remove.
func bruteForce(lazy []layoutSlot, n, max, slack int) (int, int) {
	var live []int
	created, updated, deleted := 0, 0, 0
	for i, s := range lazy {
		switch {
		case s.wasGoneBefore:
			if !s.isNew {
				deleted++
			}
			continue
		case s.isNew:
			created++
		case s.dirty:
			updated++
		}
		live = append(live, i)
	}
	bound := ceilDiv(n, max) + slack
	if n == 0 || len(live) <= bound {
		return writes(created, updated, deleted), 0
	}
	r := len(live) - bound
	bestW, bestM := -1, -1
	for mask := 0; mask < 1<<len(live); mask++ {
		if bits.OnesCount(uint(mask)) != r {
			continue
		}
		c, u, d, moved, relocate, freeRoom := created, updated, deleted, 0, 0, 0
		var rooms []int // room of kept untouched slices
		for bit, i := range live {
			s := lazy[i]
			removed := mask&(1<<bit) != 0
			switch {
			case removed && s.isNew:
				c--
			case removed && s.dirty:
				u--
				d++
			case removed:
				d++
			case s.isNew || s.dirty:
				freeRoom += max - s.size
			default:
				rooms = append(rooms, max-s.size)
			}
			if removed {
				relocate += s.size
				moved += s.kept
			}
		}
		slices.SortFunc(rooms, func(a, b int) int { return b - a })
		need := relocate - freeRoom
		for _, room := range rooms {
			if need <= 0 {
				break
			}
			need -= room
			u++
		}
		if need > 0 {
			panic(fmt.Sprintf("removal %b does not fit", mask))
		}
		w := writes(c, u, d)
		if bestW < 0 || w < bestW || (w == bestW && moved < bestM) {
			bestW, bestM = w, moved
		}
	}
	return bestW, bestM
}

// randomLayoutInput builds a small set with random fill, removals, changes,
// additions and stale slices, so that the lazy phase leaves all kinds of
// slots behind.
func randomLayoutInput(rng *rand.Rand) Input {
	max := 1 + rng.IntN(12)
	next := 0
	var existing []*discoveryv1.EndpointSlice
	var desired []discoveryv1.Endpoint
	stale := map[string]bool{}
	for i := range 1 + rng.IntN(8) {
		name := fmt.Sprintf("s%d", i)
		var content []discoveryv1.Endpoint
		for range rng.IntN(max + 1) {
			e := ep(next)
			next++
			content = append(content, e)
			switch rng.IntN(6) {
			case 0: // removed
			case 1:
				desired = append(desired, notReadyEP(next-1))
			default:
				desired = append(desired, e)
			}
		}
		existing = append(existing, slice(name, content...))
		stale[name] = rng.IntN(5) == 0
	}
	for range rng.IntN(2 * max) {
		desired = append(desired, ep(next))
		next++
	}
	in := input(max, rng.IntN(3), desired, existing...)
	in.NeedsUpdate = func(s *discoveryv1.EndpointSlice) bool { return stale[s.Name] }
	return in
}
