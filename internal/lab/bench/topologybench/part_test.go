package topologybench

import (
	"testing"

	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench/sim"
)

func TestChecksFlagWhatBreaks(t *testing.T) {
	original := sim.Stats{Algorithm: sim.Original, Valid: 10, Total: sim.Metric{Sum: 724.8}, InZone: sim.Metric{Sum: 388.4}}
	ours := sim.Stats{Algorithm: sim.Fleetslice, Threshold: 0.25, Valid: 10}
	failed := func(results []sim.Stats, sample int) map[string]string {
		out := map[string]string{}
		for _, c := range checks(results, sample) {
			if !c.Passed() {
				out[c.Name] = c.Failure
			}
		}
		return out
	}
	if f := failed([]sim.Stats{original, ours}, 0); len(f) != 0 {
		t.Errorf("sound results failed: %v", f)
	}
	over := ours
	over.OverThreshold = 3
	short := ours
	short.Threshold, short.Valid = 0.2, 9
	wrong := original
	wrong.InZone.Sum = 400
	f := failed([]sim.Stats{wrong, over, short}, 0)
	for _, name := range []string{
		"every algorithm scored the same cases",
		"fleetslice@0.25: no case puts an endpoint over its threshold",
		"original reproduces the published 72.48 total and 38.84 in-zone",
	} {
		if _, ok := f[name]; !ok {
			t.Errorf("%q not flagged; failures: %v", name, f)
		}
	}
	if len(f) != 3 {
		t.Errorf("want exactly 3 failures, got %v", f)
	}
	// On a sample the published row is not expected.
	if f := failed([]sim.Stats{wrong, ours}, 1000); len(f) != 0 {
		t.Errorf("a sample was held to the published row: %v", f)
	}
}
