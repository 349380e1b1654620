// Package sim re-implements the evaluation of the topology-aware routing talk (the published
// googleinterns/k8s-topology-simulator): the 3-zone input space, its theoretical traffic model,
// and its in-zone, deviation and slice scores, so that fleetslice's allocator can be compared
// with no hints ("original") and with upstream's topologycache on exactly the published inputs.
package sim

// Zones is the number of zones in the published input space.
const Zones = 3

// Case is one input: Nodes[z] Nodes and Endpoints[z] endpoints in zone z. Zone z sends traffic in
// proportion to its Nodes.
type Case struct {
	Nodes     [Zones]int
	Endpoints [Zones]int
}

// TotalEndpoints is the number of endpoints of the case.
func (c Case) TotalEndpoints() int {
	return c.Endpoints[0] + c.Endpoints[1] + c.Endpoints[2]
}

// section is one block of the published input file: a sorted Node triple crossed with every
// sorted endpoint triple whose values run from lo to hi (inclusive) in steps of step, without
// the all-zero triple.
type section struct {
	nodes        [Zones]int
	lo, hi, step int
}

// sections lists the published space in the published order: every sorted Node triple from
// 1..10 with endpoints 0..100, then Nodes (30,30,30) with endpoints 100..1000 in steps of 7.
// Both triples are sorted ascending and paired zone by zone, exactly as the generator did, so
// the zone with the fewest Nodes never has the most endpoints; that pairing matters for the
// in-zone means.
func sections() []section {
	var out []section
	for a := 1; a <= 10; a++ {
		for b := a; b <= 10; b++ {
			for c := b; c <= 10; c++ {
				out = append(out, section{nodes: [Zones]int{a, b, c}, lo: 0, hi: 100, step: 1})
			}
		}
	}
	return append(out, section{nodes: [Zones]int{30, 30, 30}, lo: 100, hi: 1000, step: 7})
}

// size is the number of cases in the section, by counting multisets of 3 out of v values.
func (s section) size() int {
	v := (s.hi-s.lo)/s.step + 1
	n := v * (v + 1) * (v + 2) / 6
	if s.lo == 0 {
		n-- // the all-zero triple is not a case
	}
	return n
}

// forEach calls fn for every case of the section in the published order, passing the case's
// index within the section.
func (s section) forEach(fn func(i int, c Case)) {
	c := Case{Nodes: s.nodes}
	i := 0
	for a := s.lo; a <= s.hi; a += s.step {
		for b := a; b <= s.hi; b += s.step {
			for d := b; d <= s.hi; d += s.step {
				if d == 0 {
					continue
				}
				c.Endpoints = [Zones]int{a, b, d}
				fn(i, c)
				i++
			}
		}
	}
}

// CaseCount is the size of the whole published space: 39,273,145 cases.
func CaseCount() int {
	n := 0
	for _, s := range sections() {
		n += s.size()
	}
	return n
}

// ForEachCase walks the whole space in the published order.
func ForEachCase(fn func(c Case)) {
	for _, s := range sections() {
		s.forEach(func(_ int, c Case) { fn(c) })
	}
}

// sampler picks n of total cases, evenly spread over the published order and the same on every
// run: case i is in when i*n mod total < n, which holds for exactly n indices.
type sampler struct {
	n, total int
}

func (s sampler) picks(i int) bool {
	if s.n <= 0 || s.n >= s.total {
		return true
	}
	return (int64(i)*int64(s.n))%int64(s.total) < int64(s.n)
}
