package topology

import (
	"fmt"
	"testing"
)

// FuzzAllocate decodes arbitrary bytes into zones, endpoints with current hints (some stale or
// naming unknown zones) and a threshold, and checks the allocator's promises.
func FuzzAllocate(f *testing.F) {
	f.Add([]byte{3, 25, 4, 4, 4, 4, 4, 3, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 20, 1, 1, 1, 11, 0, 0})
	f.Add([]byte{2, 5, 9, 1, 40, 1, 7, 9, 3, 2, 1, 8})
	f.Add([]byte{5, 50, 1, 2, 3, 4, 5, 200, 7, 3, 9, 0, 1, 6, 6, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func() int {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return int(b)
		}
		nZones := 2 + next()%5
		threshold := float64(next()%80) / 100
		before := next()%2 == 1
		zones := make([]Zone, nZones)
		for i := range zones {
			zones[i] = Zone{Name: fmt.Sprintf("z%d", i), MilliCPU: int64(1 + next()*37)}
		}
		var eps []Endpoint
		for len(data) > 0 && len(eps) < 400 {
			b := next()
			ep := Endpoint{Key: fmt.Sprintf("e%d", len(eps)), Zone: fmt.Sprintf("z%d", b%nZones)}
			switch h := (b / 8) % 8; {
			case h == 7:
				ep.Hint = "gone"
			case h < nZones && h < 6:
				ep.Hint = fmt.Sprintf("z%d", h)
			}
			for range b % 4 { // repeat to reach realistic sizes from short inputs
				eps = append(eps, ep)
				ep.Key += "+"
			}
		}
		o := Options{OverloadThreshold: threshold, MinEndpointsPerZone: 3, EnabledBefore: before}
		res := Allocate(zones, eps, o)
		if !res.Enabled {
			if res.Hints != nil || res.Reason == "" || res.Message == "" {
				t.Fatalf("off without reason or with hints: %+v", res)
			}
			if res.Reason == MinAllocationExceedsOverloadThreshold {
				assertInfeasible(t, zones, len(eps), threshold)
			}
			return
		}
		if len(res.Hints) != len(eps) {
			t.Fatalf("%d hints for %d endpoints", len(res.Hints), len(eps))
		}
		known := map[string]bool{}
		for _, z := range zones {
			known[z.Name] = true
		}
		for i, h := range res.Hints {
			if !known[h] {
				t.Fatalf("endpoint %d hinted for unknown zone %q", i, h)
			}
		}
		if tr := ExpectedTraffic(zones, eps, res.Hints); tr.MaxOverload > threshold+1e-9 {
			t.Fatalf("max overload %.6f above threshold %.2f", tr.MaxOverload, threshold)
		}
		if keepsBound(zones, eps, threshold) && res.Moved != 0 {
			t.Fatalf("current hints met the bound but %d moved", res.Moved)
		}
		if want := fewestMoves(zones, eps, threshold); res.Moved != want {
			t.Fatalf("moved %d hinted endpoints, the fewest possible is %d", res.Moved, want)
		}
		again := Allocate(zones, withHints(eps, res.Hints), Options{OverloadThreshold: threshold, MinEndpointsPerZone: 3, EnabledBefore: true})
		if !again.Enabled || again.Changed {
			t.Fatalf("feeding the hints back changed them: %+v", again)
		}
	})
}

// assertInfeasible checks by counting that no hints can meet the bound: every zone needs its
// minimum and together they exceed the endpoints.
func assertInfeasible(t *testing.T, zones []Zone, endpoints int, threshold float64) {
	t.Helper()
	var total int64
	for _, z := range zones {
		total += z.MilliCPU
	}
	need := 0
	for _, z := range zones {
		need += MinimumHinted(z.MilliCPU, total, endpoints, threshold)
	}
	if need <= endpoints {
		t.Fatalf("gave up although %d endpoints cover the %d the bound needs", endpoints, need)
	}
}

// keepsBound reports whether the current hints, with own-zone hints for endpoints that have
// none usable, already meet the bound.
func keepsBound(zones []Zone, eps []Endpoint, threshold float64) bool {
	known := map[string]bool{}
	for _, z := range zones {
		known[z.Name] = true
	}
	hints := make([]string, len(eps))
	for i, ep := range eps {
		hints[i] = ep.Hint
		if !known[ep.Hint] {
			hints[i] = ep.Zone
		}
	}
	tr := ExpectedTraffic(zones, eps, hints)
	per := hintCounts(hints)
	for _, z := range zones {
		if per[z.Name] == 0 {
			return false
		}
	}
	return tr.MaxOverload <= threshold+1e-9
}

// fewestMoves is the least number of usable hints that must change: every zone short of its
// minimum needs one endpoint per missing unit, and only unhinted endpoints in zones above their
// minimum can fill a unit without moving a hint.
func fewestMoves(zones []Zone, eps []Endpoint, threshold float64) int {
	var total int64
	index := map[string]int{}
	for i, z := range zones {
		total += z.MilliCPU
		index[z.Name] = i
	}
	perZone := make([]int, len(zones))
	free := make([]int, len(zones))
	for _, ep := range eps {
		if h, ok := index[ep.Hint]; ok {
			perZone[h]++
			continue
		}
		perZone[index[ep.Zone]]++
		free[index[ep.Zone]]++
	}
	missing, spare := 0, 0
	for i, z := range zones {
		m := MinimumHinted(z.MilliCPU, total, len(eps), threshold)
		if perZone[i] < m {
			missing += m - perZone[i]
		} else {
			spare += min(free[i], perZone[i]-m)
		}
	}
	return max(0, missing-spare)
}
