package sim

import (
	"cmp"
	"slices"
)

// Upstream's topologycache reads Nodes only as each zone's share of the cluster's CPU (its
// SetNodes keeps nothing else that AddHints uses), so sections whose Node counts are multiples of
// one another, (1,1,2) and (3,3,6) say, get the same hints for the same endpoints. 48 of the
// published 220 Node triples are such multiples: planning each endpoint triple once per group of
// sections spares about a fifth of upstream's runtime, which is most of the whole table's. The
// scores still use every case's own Nodes, which set the traffic.

// proportional is implemented by algorithms whose plan depends on the Nodes only through their
// ratios.
type proportional interface{ proportionalToNodes() }

func (*upstream) proportionalToNodes() {}

func isProportional(alg Algorithm) bool {
	_, ok := alg.(proportional)
	return ok
}

// shareGroups lists the sections one worker scores together, in the published order of their
// first sections: every section alone, or when plans are shared, every section with the same
// Node ratios and endpoint range together.
func shareGroups(secs []section, share bool) [][]int {
	type key struct {
		nodes        [Zones]int
		lo, hi, step int
	}
	var groups [][]int
	at := map[key]int{}
	for i, s := range secs {
		k := key{nodes: reduceRatio(s.nodes), lo: s.lo, hi: s.hi, step: s.step}
		if g, ok := at[k]; ok && share {
			groups[g] = append(groups[g], i)
			continue
		}
		at[k] = len(groups)
		groups = append(groups, []int{i})
	}
	return groups
}

// byCostFirst orders groups by their planning cost, largest first, so that the costliest group
// (the 30-Node section's thousands of endpoints per case) does not start last and leave the
// other workers idle while it runs. Results are kept by section, so order changes nothing else.
func byCostFirst(secs []section, groups [][]int) [][]int {
	cost := func(g []int) int {
		s := secs[g[0]]
		return s.size() * (s.lo + s.hi)
	}
	slices.SortStableFunc(groups, func(a, b []int) int { return cmp.Compare(cost(b), cost(a)) })
	return groups
}

// reduceRatio divides the counts by their greatest common divisor.
func reduceRatio(n [Zones]int) [Zones]int {
	g := 0
	for _, v := range n {
		g = gcd(g, v)
	}
	if g <= 1 {
		return n
	}
	for z := range n {
		n[z] /= g
	}
	return n
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// planMemo holds one group's plans by case index within a section (the sections of a group
// enumerate the same endpoint triples in the same order).
type planMemo struct {
	on    bool
	plans []Plan
	state []planState
}

type planState uint8

const (
	notPlanned planState = iota
	hinted
	unhinted
)

// reset empties the memo for a group of sections of size cases each; a group of one section
// plans every case once anyway, so on is false there and nothing is stored.
func (m *planMemo) reset(on bool, size int) *planMemo {
	m.on = on
	if !on {
		return m
	}
	if cap(m.state) < size {
		m.plans, m.state = make([]Plan, size), make([]planState, size)
	}
	m.plans, m.state = m.plans[:size], m.state[:size]
	clear(m.state)
	return m
}

// plan returns case j's plan, from the memo when an earlier section of the group planned it;
// scratch receives it when the memo is off.
func (m *planMemo) plan(alg Algorithm, j int, c Case, scratch *Plan) (*Plan, bool) {
	if !m.on {
		return scratch, alg.Plan(c, scratch)
	}
	if m.state[j] == notPlanned {
		m.state[j] = unhinted
		if alg.Plan(c, &m.plans[j]) {
			m.state[j] = hinted
		}
	}
	return &m.plans[j], m.state[j] == hinted
}
