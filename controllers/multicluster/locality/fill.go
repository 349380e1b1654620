package locality

import (
	"cmp"
	"math"
	"slices"
)

// split says how volume divides over the eligible units (clusters, or zones of one cluster)
// when it is poured into their spare capacity "the most spare first": the least loaded unit
// receives until it is as loaded as the next, then both, and so on, so that every unit that
// receives ends at the same load relative to its capacity, the lowest the others allow. Every
// spilling unit uses the same split, which keeps the result independent of spiller order.
//
// keep is what each unit carries already and capacity what it may carry; the result is aligned
// with them and sums to 1 (or is all zero when no eligible unit has capacity). With no volume
// the split is where the next bit of traffic would go: in proportion to spare capacity, or to
// capacity when nobody has room left.
func split(keep, capacity []float64, eligible func(int) bool, volume float64, out []float64) []float64 {
	out = slices.Grow(out[:0], len(keep))[:len(keep)]
	clear(out)
	var order []int
	var spare, total float64
	for i := range keep {
		if eligible(i) && capacity[i] > 0 {
			order = append(order, i)
			spare += math.Max(0, capacity[i]-keep[i])
			total += capacity[i]
		}
	}
	if len(order) == 0 {
		return out
	}
	if !(volume > 0) {
		for _, i := range order {
			if spare > 0 {
				out[i] = math.Max(0, capacity[i]-keep[i]) / spare
			} else {
				out[i] = capacity[i] / total
			}
		}
		return out
	}
	// Stable by input order, which the caller sorted by name: ties never depend on map order.
	slices.SortStableFunc(order, func(a, b int) int {
		return compareRatio(keep[a], capacity[a], keep[b], capacity[b])
	})
	var sumKeep, sumCap, level float64
	filled := 0
	for _, i := range order {
		if filled > 0 && keep[i]/capacity[i] >= level {
			break
		}
		sumKeep += keep[i]
		sumCap += capacity[i]
		filled++
		level = (volume + sumKeep) / sumCap
	}
	var sum float64
	for _, i := range order[:filled] {
		out[i] = math.Max(0, level*capacity[i]-keep[i])
		sum += out[i]
	}
	if sum <= 0 {
		return out
	}
	for _, i := range order[:filled] {
		out[i] /= sum
	}
	return out
}

// compareRatio orders keep/capacity ratios without dividing, so equal loads compare equal.
func compareRatio(keepA, capA, keepB, capB float64) int {
	return cmp.Compare(keepA*capB, keepB*capA)
}

func clamp01(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return math.Min(1, math.Max(0, v))
}
