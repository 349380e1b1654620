package sim

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestEvaluateAndScore(t *testing.T) {
	tests := []struct {
		name                   string
		c                      Case
		plan                   *Plan
		inZone, maxDev, meanDv float64
		overload               float64
		total, grouped         float64
		invalid                bool
	}{
		{
			// one endpoint per zone, equal zones, no hints: a third stays in zone.
			name: "original equal", c: Case{Nodes: [3]int{1, 1, 1}, Endpoints: [3]int{1, 1, 1}},
			inZone: 1.0 / 3, total: 0.45*100.0/3 + 40 + 15, grouped: 0.45*100.0/3 + 40 + 15,
		},
		{
			// weights 1/6, 2/6, 3/6; hinted counts 2, 1, 3: loads 1/12, 1/3, 1/6 against 1/6 fair,
			// deviations -0.5, +1, 0; in-zone 1/6*1 + 2/6*0 + 3/6*1.
			name: "hand computed hints", c: Case{Nodes: [3]int{1, 2, 3}, Endpoints: [3]int{2, 0, 4}},
			plan:   &Plan{2, 0, 0, 0, 0, 0, 0, 1, 3},
			inZone: 2.0 / 3, maxDev: 1, meanDv: 1.0 / 3, overload: 1,
			total:   0.45*200.0/3 + 0.4*(0.5*0+0.5*(100-100.0/3)) + 0.15*100,
			grouped: 0.45*200.0/3 + 0.4*(0.5*0+0.5*(100-100.0/3)) + 0.15*100.0/3,
		},
		{
			// zone c has no hinted endpoint: kube-proxy spreads its half over all six endpoints,
			// which makes every load exactly fair.
			name: "zone without hints falls back", c: Case{Nodes: [3]int{1, 1, 2}, Endpoints: [3]int{3, 3, 0}},
			plan:   &Plan{3, 0, 0, 0, 3, 0, 0, 0, 0},
			inZone: 0.5, total: 0.45*50 + 40 + 15, grouped: 0.45*50 + 40 + 0.15*50,
		},
		{
			name: "plan that loses endpoints is invalid", c: Case{Nodes: [3]int{1, 1, 1}, Endpoints: [3]int{3, 3, 3}},
			plan: &Plan{3, 0, 0, 0, 3, 0, 0, 0, 2}, invalid: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Evaluate(tc.c, tc.plan)
			if o.Invalid != tc.invalid {
				t.Fatalf("invalid = %v", o.Invalid)
			}
			if tc.invalid {
				return
			}
			if !near(o.InZone, tc.inZone) || !near(o.MaxDeviation, tc.maxDev) || !near(o.MeanDeviation, tc.meanDv) || !near(o.MaxOverload, tc.overload) {
				t.Fatalf("outcome %+v", o)
			}
			s := o.Score()
			if !near(s.Total, tc.total) || !near(s.GroupedTotal, tc.grouped) {
				t.Fatalf("scores %+v, want total %v grouped %v", s, tc.total, tc.grouped)
			}
		})
	}
}

func TestSliceCounts(t *testing.T) {
	c := Case{Nodes: [3]int{1, 1, 1}, Endpoints: [3]int{101, 99, 50}}
	o := Evaluate(c, &Plan{101, 0, 0, 0, 99, 0, 0, 0, 50})
	if o.Slices != 3 || o.GroupedSlices != 4 || !near(o.Score().GroupedSlice, 75) || !near(o.Score().Slice, 100) {
		t.Fatalf("slices %d grouped %d", o.Slices, o.GroupedSlices)
	}
}
