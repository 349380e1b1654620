package tiers

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// alpha is the chance that one destination's count fails a right data path: a normal deviate
// beyond five standard deviations either way, 5.7e-7. The check is exact binomial, not the
// normal approximation, which is poor at the small shares a spill can have.
var alpha = math.Erfc(5 / math.Sqrt2)

// requestsPerMember is how many requests each member's client sends at each step. The closest
// wrong answer the steps must catch is the KEP's default at failover, where c2 keeps all its
// traffic instead of spilling 1/16 of it to c3: a right data path sends none of 300 requests to
// c3 with probability (15/16)^300 = 3.9e-9, below alpha/2, so 0 is outside the range a right
// one may show and that wrong answer always fails; 234 requests is the least that does it.
// TestCountedRequestsTellTiersApart computes this for every step and every wrong answer listed.
const requestsPerMember = 300

// binomialRange is the range of counts, out of n requests, that a destination with share p of
// them receives but with probability alpha: the smallest lo and the largest hi whose lower and
// upper binomial tails are each at least alpha/2. A destination the rules never pick (p = 0)
// must receive none, one they always pick (p = 1) every request.
func binomialRange(n int, p float64) (lo, hi int) {
	if p <= 0 {
		return 0, 0
	}
	if p >= 1 {
		return n, n
	}
	pmf := func(k int) float64 {
		a, _ := math.Lgamma(float64(n + 1))
		b, _ := math.Lgamma(float64(k + 1))
		c, _ := math.Lgamma(float64(n - k + 1))
		return math.Exp(a - b - c + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p))
	}
	for tail := 0.0; lo < n; lo++ {
		if tail += pmf(lo); tail >= alpha/2 {
			break
		}
	}
	hi = n
	for tail := 0.0; hi > 0; hi-- {
		if tail += pmf(hi); tail >= alpha/2 {
			break
		}
	}
	return lo, hi
}

// countsFit checks the answers each cluster gave out of n requests against the shares p of the
// rules that sent them: every cluster's count within its binomialRange.
func countsFit(counts map[string]int, n int, p map[string]float64) error {
	for _, d := range destinations(p, counts) {
		lo, hi := binomialRange(n, p[d])
		if k := counts[d]; k < lo || k > hi {
			return fmt.Errorf("%s answered %d of %d requests, %.1f%%; its share of %.2f%% allows %d to %d at five sigma (counts %v)",
				d, k, n, 100*float64(k)/float64(n), 100*p[d], lo, hi, counts)
		}
	}
	return nil
}

// acceptance is the probability that countsFit passes for rules of shares p when the requests
// really go by shares q: the multinomial probability of the counts within every range.
func acceptance(n int, p, q map[string]float64) float64 {
	var support []string
	for _, d := range destinations(p, q) {
		if q[d] > 0 {
			support = append(support, d)
			continue
		}
		if lo, _ := binomialRange(n, p[d]); lo > 0 {
			return 0 // q never sends there, and p needs some
		}
	}
	logFact := func(k int) float64 { v, _ := math.Lgamma(float64(k + 1)); return v }
	var sum func(i, left int, logP float64) float64
	sum = func(i, left int, logP float64) float64 {
		d := support[i]
		lo, hi := binomialRange(n, p[d])
		if i == len(support)-1 {
			if left < lo || left > hi {
				return 0
			}
			return math.Exp(logP - logFact(left) + float64(left)*math.Log(q[d]))
		}
		total := 0.0
		for k := lo; k <= min(hi, left); k++ {
			total += sum(i+1, left-k, logP-logFact(k)+float64(k)*math.Log(q[d]))
		}
		return total
	}
	return sum(0, n, logFact(n))
}

func destinations[V any](p map[string]float64, other map[string]V) []string {
	all := slices.Collect(maps.Keys(p))
	for d := range other {
		if _, ok := p[d]; !ok {
			all = append(all, d)
		}
	}
	slices.Sort(all)
	return all
}

// TestCountedRequestsTellTiersApart checks the request count against the steps' rows: counts
// from a right data path pass (each row fails with at most the union of its destinations'
// alpha), and those from each wrong answer a step lists fail but with probability alpha.
func TestCountedRequestsTellTiersApart(t *testing.T) {
	for _, s := range tierSteps("c1", "c2", "c3", locality.DefaultOptions().OverloadThreshold) {
		for _, m := range []string{"c1", "c2", "c3"} {
			p := s.want[m]
			miss := 1 - acceptance(requestsPerMember, p, p)
			if limit := float64(len(p)) * alpha; miss > limit {
				t.Errorf("%s, %s's clients: right counts fail with probability %.2g, over %.2g", s.name, m, miss, limit)
			}
			for what, q := range s.wrong[m] {
				pass := acceptance(requestsPerMember, p, q)
				t.Logf("%s, %s's clients: right counts fail with probability %.2g; %s (%v) passes with %.2g",
					s.name, m, miss, what, q, pass)
				if pass > alpha {
					t.Errorf("%s, %s's clients: %s (%v) passes the check of %v with probability %.2g, over %.2g",
						s.name, m, what, q, p, pass, alpha)
				}
			}
		}
	}
}
