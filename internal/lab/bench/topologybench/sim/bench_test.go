package sim

import (
	"context"
	"testing"
)

// BenchmarkRunSample scores 20,000 evenly spread cases per iteration.
func BenchmarkRunSample(b *testing.B) {
	for _, s := range []Settings{{Algorithm: Original}, {Algorithm: Fleetslice, Threshold: 0.25}, {Algorithm: Upstream}} {
		b.Run(s.Algorithm, func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(context.Background(), Config{Settings: s, Sample: 20_000, Workers: 1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFleetsliceCase is one allocation plus scoring of a lopsided case.
func BenchmarkFleetsliceCase(b *testing.B) {
	alg, _ := NewAlgorithm(Settings{Algorithm: Fleetslice, Threshold: 0.25})
	c := Case{Nodes: [3]int{1, 4, 9}, Endpoints: [3]int{3, 40, 90}}
	var plan Plan
	var st Stats
	b.ReportAllocs()
	for b.Loop() {
		alg.Plan(c, &plan)
		st.Add(Evaluate(c, &plan))
	}
}
