package topology

import (
	"errors"
	"math"
)

// boundSlack absorbs float rounding in the bound: without it an exact 3.0 computed as
// 3.0000000000000004 would demand a fourth endpoint nobody needs.
const boundSlack = 1e-9

// MinimumHinted is how many endpoints must be hinted for a zone holding cpu of total CPU so that
// none of them expects more than (1+threshold) times the fair share of the endpoints ready.
func MinimumHinted(cpu, total int64, endpoints int, threshold float64) int {
	if cpu <= 0 || total <= 0 || endpoints <= 0 {
		return 0
	}
	x := float64(cpu) / float64(total) * float64(endpoints) / (1 + threshold)
	return int(math.Ceil(x - boundSlack*x))
}

// CountInput is the allocator's view on counts, with zones numbered 0..Z-1.
type CountInput struct {
	// MilliCPU per zone; every entry must be positive.
	MilliCPU []int64
	// Hinted is a Z*Z matrix, row = zone the endpoint runs in, column = zone it is hinted for,
	// counting endpoints whose current hint is kept unless it must move. Nil means none.
	Hinted []int
	// Unhinted counts, per zone the endpoint runs in, ready endpoints without a usable hint.
	Unhinted []int
	// OverloadThreshold as in Options.
	OverloadThreshold float64
}

// Move says that Count endpoints running in Zone and hinted for From must be hinted for To.
type Move struct {
	Zone, From, To, Count int
}

// Planner turns counts into a hint plan. Its slices are reused between calls so that the
// simulator can run millions of cases without allocating; a Planner is not safe for concurrent
// use.
type Planner struct {
	// Final is the resulting Z*Z matrix (row = zone of the endpoint, column = hint).
	Final []int
	// FreeHints is the Z*Z matrix of where the unhinted endpoints go.
	FreeHints []int
	// Moves lists the hinted endpoints that must change hint, at most once each.
	Moves []Move
	// Minimum is the per-zone minimum number of hinted endpoints the bound needs.
	Minimum []int
	// PerZone is the resulting number of endpoints hinted for each zone.
	PerZone []int
}

var errBadCounts = errors.New("topology: counts do not match the number of zones or are negative")

// ErrInfeasible means that no hints can keep every endpoint within the overload threshold.
var ErrInfeasible = errors.New("topology: no hint assignment meets the overload threshold")

// Plan computes hints for the counts in in. It starts from the current hints plus own-zone hints
// for unhinted endpoints; when that already meets the bound nothing moves. Otherwise, for each
// zone short of its minimum it takes one endpoint at a time from a zone that has more than its
// minimum, preferring, in this order: unhinted endpoints (they are written anyway), endpoints
// coming back to their own zone, endpoints serving a zone not their own, and then the donor whose
// endpoints expect the least load, so that surplus zones give first. Each move fixes one missing
// endpoint, so the number of hinted endpoints moved is the smallest possible.
func (p *Planner) Plan(in CountInput) error {
	zones := len(in.MilliCPU)
	if zones == 0 || len(in.Unhinted) != zones || (in.Hinted != nil && len(in.Hinted) != zones*zones) {
		return errBadCounts
	}
	if ValidateOverloadThreshold(in.OverloadThreshold) != nil {
		return errBadCounts
	}
	p.reset(zones)
	var total int64
	for _, c := range in.MilliCPU {
		if c <= 0 {
			return errBadCounts
		}
		total += c
	}
	endpoints := 0
	for i, c := range in.Hinted {
		if c < 0 {
			return errBadCounts
		}
		p.Final[i] = c
		endpoints += c
	}
	for z, c := range in.Unhinted {
		if c < 0 {
			return errBadCounts
		}
		p.Final[z*zones+z] += c
		p.FreeHints[z*zones+z] = c
		endpoints += c
	}
	for l := 0; l < zones; l++ {
		for h := 0; h < zones; h++ {
			p.PerZone[h] += p.Final[l*zones+h]
		}
	}
	needed := 0
	for z := range zones {
		p.Minimum[z] = MinimumHinted(in.MilliCPU[z], total, endpoints, in.OverloadThreshold)
		needed += p.Minimum[z]
	}
	if needed > endpoints {
		return ErrInfeasible
	}
	for d := range zones {
		for p.PerZone[d] < p.Minimum[d] {
			if !p.moveOne(d, in.MilliCPU) {
				// Unreachable when the minimums fit, kept so that a bug cannot loop forever.
				return ErrInfeasible
			}
		}
	}
	return nil
}

func (p *Planner) reset(zones int) {
	p.Final = resize(p.Final, zones*zones)
	p.FreeHints = resize(p.FreeHints, zones*zones)
	p.Minimum = resize(p.Minimum, zones)
	p.PerZone = resize(p.PerZone, zones)
	p.Moves = p.Moves[:0]
}

func resize(s []int, n int) []int {
	if cap(s) < n {
		return make([]int, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// moveOne re-hints one endpoint for zone d, picking the cheapest and least harmful donor cell.
func (p *Planner) moveOne(d int, cpu []int64) bool {
	zones := len(cpu)
	bestL, bestS := -1, -1
	var bestCost, bestKind int
	for s := range zones {
		if s == d || p.PerZone[s] <= p.Minimum[s] {
			continue
		}
		for l := range zones {
			if p.Final[l*zones+s] == 0 {
				continue
			}
			cost := 1
			if p.FreeHints[l*zones+s] > 0 {
				cost = 0
			}
			kind := 2 // the donor's own endpoint: costs the donor nothing in-zone, still fine
			switch {
			case l == d:
				kind = 0 // goes back home: the receiving zone gains in-zone traffic
			case l != s:
				kind = 1 // was serving a foreign zone: the donor gains in-zone traffic
			}
			if bestL < 0 || cost < bestCost || (cost == bestCost && (kind < bestKind ||
				(kind == bestKind && lessLoaded(cpu, p.PerZone, s, bestS)))) {
				bestL, bestS, bestCost, bestKind = l, s, cost, kind
			}
		}
	}
	if bestL < 0 {
		return false
	}
	from, to := bestL*zones+bestS, bestL*zones+d
	p.Final[from]--
	p.Final[to]++
	p.PerZone[bestS]--
	p.PerZone[d]++
	if bestCost == 0 {
		p.FreeHints[from]--
		p.FreeHints[to]++
		return true
	}
	if n := len(p.Moves); n > 0 {
		last := &p.Moves[n-1]
		if last.Zone == bestL && last.From == bestS && last.To == d {
			last.Count++
			return true
		}
	}
	p.Moves = append(p.Moves, Move{Zone: bestL, From: bestS, To: d, Count: 1})
	return true
}

// lessLoaded reports whether an endpoint hinted for zone a expects strictly less traffic than one
// hinted for zone b; equal loads keep the earlier choice so results do not depend on map order.
func lessLoaded(cpu []int64, perZone []int, a, b int) bool {
	return cpu[a]*int64(perZone[b]) < cpu[b]*int64(perZone[a])
}
