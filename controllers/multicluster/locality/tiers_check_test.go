package locality

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// checkTiers holds a tiered allocation to its promises, recomputing every load from the
// published shares alone:
//   - one row per cluster, ascending; each row's shares add up to 1; no share to a cluster
//     without ready endpoints; the reported loads are the shares' loads;
//   - no cluster (and no zone) over the bound;
//   - fresh allocations (no previous, or previous ignored) spill the least level by level: a
//     client sends traffic beyond one of its levels only when every cluster of that level is at
//     the bound;
//   - with a previous allocation, no client spills beyond any level more than the fresh
//     decision at the return threshold would (the return band).
func checkTiers(t *testing.T, clusters []Cluster, previous []ClusterAllocation, opts Options, res Result, fresh bool) {
	t.Helper()
	byName, cpu, endpoints := index(clusters)
	if endpoints == 0 || cpu == 0 {
		if res.Mode == Local || res.Mode == Spill {
			t.Fatalf("no endpoints or no CPU gave %s", res.Mode)
		}
		return
	}
	if res.Mode != Local && res.Mode != Spill {
		t.Fatalf("feasible input gave %s (%s: %s)", res.Mode, res.Reason, res.Message)
	}
	if len(res.Clusters) != len(clusters) || !slices.IsSortedFunc(res.Clusters, func(a, b ClusterAllocation) int { return strings.Compare(a.Cluster, b.Cluster) }) {
		t.Fatalf("rows %+v for %d clusters", res.Clusters, len(clusters))
	}
	received := loadsOf(t, byName, res)
	fair := float64(cpu) / float64(endpoints)
	bound := 1 + opts.OverloadThreshold
	load := map[string]float64{}
	for _, a := range res.Clusters {
		c := byName[a.Cluster]
		w, n := totals(c)
		if n == 0 {
			continue
		}
		load[a.Cluster] = received[a.Cluster] / (float64(n) * fair)
		if load[a.Cluster] > bound+tolerance || math.Abs(load[a.Cluster]-a.Load) > tolerance {
			t.Fatalf("%s's endpoints expect %.6f of their fair share (reported %.6f), bound %.2f", a.Cluster, load[a.Cluster], a.Load, bound)
		}
		checkZones(t, c, a, received[a.Cluster]-float64(w)*a.Local, fair, opts.OverloadThreshold)
	}
	var band Result
	if !fresh {
		band = AllocateTiers(clusters, nil, Options{OverloadThreshold: opts.ReturnThreshold, ReturnThreshold: opts.ReturnThreshold})
	}
	for _, a := range res.Clusters {
		if w, _ := totals(byName[a.Cluster]); w == 0 {
			continue
		}
		for _, level := range testLevels(byName, byName[a.Cluster]) {
			beyond := beyondLevel(a, level)
			if fresh && beyond > tolerance {
				for _, d := range level {
					if load[d] < bound-tolerance {
						t.Fatalf("%s sends %.6f beyond its level %v while %s is at %.6f, under the bound", a.Cluster, beyond, level, d, load[d])
					}
				}
			}
			if !fresh {
				b, _ := band.For(a.Cluster)
				if most := beyondLevel(b, level); beyond > most+tolerance {
					t.Fatalf("%s sends %.6f beyond its level %v, the return band allows %.6f", a.Cluster, beyond, level, most)
				}
			}
		}
	}
}

func index(clusters []Cluster) (map[string]Cluster, int64, int) {
	byName := map[string]Cluster{}
	var cpu int64
	endpoints := 0
	for _, c := range clusters {
		w, n := totals(c)
		cpu += w
		endpoints += n
		byName[c.Name] = c
	}
	return byName, cpu, endpoints
}

// loadsOf checks every row and returns the traffic each cluster receives, in CPU units.
func loadsOf(t *testing.T, byName map[string]Cluster, res Result) map[string]float64 {
	t.Helper()
	received := map[string]float64{}
	for _, a := range res.Clusters {
		w, n := totals(byName[a.Cluster])
		if a.Local < 0 || a.Local > 1 || (n == 0 && a.Local != 0) {
			t.Fatalf("%s keeps %v with %d endpoints", a.Cluster, a.Local, n)
		}
		sum := a.Local
		for _, s := range a.Spill {
			if _, tn := totals(byName[s.To]); tn == 0 || s.To == a.Cluster || !(s.Share > 0) {
				t.Fatalf("%s sends %v to %q (itself, unknown or without endpoints)", a.Cluster, s.Share, s.To)
			}
			sum += s.Share
			received[s.To] += float64(w) * s.Share
		}
		if math.Abs(sum-1) > tolerance {
			t.Fatalf("%s's shares add up to %v: %+v", a.Cluster, sum, a)
		}
		received[a.Cluster] += float64(w) * a.Local
	}
	return received
}

// beyondLevel is the share of a row sent outside level.
func beyondLevel(a ClusterAllocation, level []string) float64 {
	out := 0.0
	if !slices.Contains(level, a.Cluster) {
		out += a.Local
	}
	for _, s := range a.Spill {
		if !slices.Contains(level, s.To) {
			out += s.Share
		}
	}
	return out
}

// testLevels rebuilds a client's levels from its tiers by the documented rule, independently of
// the allocator: its own cluster just before the first tier holding it (else last), each tier
// adding its clusters with ready endpoints, and only levels that grow.
func testLevels(byName map[string]Cluster, c Cluster) [][]string {
	var out [][]string
	var cum []string
	add := func(names []string) {
		grew := false
		for _, name := range names {
			if _, n := totals(byName[name]); n > 0 && !slices.Contains(cum, name) {
				cum, grew = append(cum, name), true
			}
		}
		if grew {
			out = append(out, slices.Clone(cum))
		}
	}
	own := false
	for _, tier := range c.Tiers {
		if !own && slices.Contains(tier, c.Name) {
			own = true
			add([]string{c.Name})
		}
		add(tier)
	}
	if !own {
		add([]string{c.Name})
	}
	return out
}

// sameRows compares two results' rows within tolerance, but for the rows of clusters that
// skip names: a cluster without demand sends nothing, and the two allocators point its row at
// the next bit's destination by different (both valid) rules.
func sameRows(t *testing.T, want, got Result, skip ...string) {
	t.Helper()
	if want.Mode != got.Mode || len(want.Clusters) != len(got.Clusters) {
		t.Fatalf("mode %s with %d rows, want %s with %d", got.Mode, len(got.Clusters), want.Mode, len(want.Clusters))
	}
	for i, w := range want.Clusters {
		g := got.Clusters[i]
		if slices.Contains(skip, w.Cluster) {
			continue
		}
		if w.Cluster != g.Cluster || math.Abs(w.Local-g.Local) > tolerance || math.Abs(w.Load-g.Load) > tolerance {
			t.Fatalf("row %+v, want %+v", g, w)
		}
		for _, s := range w.Spill {
			if math.Abs(spillOf(g, s.To)-s.Share) > tolerance {
				t.Fatalf("row %+v, want %+v", g, w)
			}
		}
		for _, s := range g.Spill {
			if math.Abs(spillOf(w, s.To)-s.Share) > tolerance {
				t.Fatalf("row %+v, want %+v", g, w)
			}
		}
	}
}
