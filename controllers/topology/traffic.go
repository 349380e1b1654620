package topology

import "math"

// Traffic is the expected outcome of a set of hints under the load model of the package comment.
// Deviations are relative to the fair share 1/E: +0.25 means 25% more than fair.
type Traffic struct {
	// MaxOverload is the largest positive deviation (0 when nobody is above fair share).
	MaxOverload float64
	// MaxDeviation is the largest absolute deviation, over- or under-loaded.
	MaxDeviation float64
	// MeanDeviation is the mean absolute deviation over the endpoints.
	MeanDeviation float64
	// InZone is the share of traffic served in the zone it comes from.
	InZone float64
}

// ExpectedTraffic evaluates hints (aligned with endpoints, nil for none) the way kube-proxy
// uses them: when any endpoint lacks a hint, every zone spreads its traffic over all endpoints;
// a zone for which no endpoint is hinted spreads its own traffic over all endpoints too.
func ExpectedTraffic(zones []Zone, endpoints []Endpoint, hints []string) Traffic {
	var total int64
	for _, z := range zones {
		if z.MilliCPU > 0 {
			total += z.MilliCPU
		}
	}
	e := len(endpoints)
	if e == 0 || total <= 0 {
		return Traffic{}
	}
	useHints := len(hints) == e
	for _, h := range hints {
		if h == "" {
			useHints = false
		}
	}
	perZone := map[string]int{}
	located := map[string]int{}
	ownHinted := map[string]int{}
	for i, ep := range endpoints {
		located[ep.Zone]++
		if useHints {
			perZone[hints[i]]++
			if hints[i] == ep.Zone {
				ownHinted[ep.Zone]++
			}
		}
	}
	share := map[string]float64{}
	var spread, inZone float64 // spread: traffic every endpoint gets from zones without hints
	for _, z := range zones {
		if z.MilliCPU <= 0 {
			continue
		}
		w := float64(z.MilliCPU) / float64(total)
		share[z.Name] += w
		if n := perZone[z.Name]; n > 0 {
			inZone += w * float64(ownHinted[z.Name]) / float64(n)
		} else {
			spread += w / float64(e)
			inZone += w * float64(located[z.Name]) / float64(e)
		}
	}
	t := Traffic{InZone: inZone}
	for i := range endpoints {
		load := spread
		if useHints {
			if n := perZone[hints[i]]; n > 0 {
				load += share[hints[i]] / float64(n)
			}
		}
		d := load*float64(e) - 1
		t.MaxOverload = math.Max(t.MaxOverload, d)
		t.MaxDeviation = math.Max(t.MaxDeviation, math.Abs(d))
		t.MeanDeviation += math.Abs(d) / float64(e)
	}
	return t
}
