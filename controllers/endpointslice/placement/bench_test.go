package placement

import (
	"fmt"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// BenchmarkPlan measures a first sync (every slice created) and a sync
// after a 1% change (a third of the changed endpoints removed, a third
// added, a third flipped to not ready) at 1k, 10k and 100k endpoints with
// the default 100 endpoints per slice.
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		desired := eps(0, n)
		b.Run(fmt.Sprintf("n=%d/create", n), func(b *testing.B) {
			in := input(100, 1, desired)
			benchmarkPlan(b, in)
		})
		b.Run(fmt.Sprintf("n=%d/change1pct", n), func(b *testing.B) {
			c := newCluster()
			c.apply(b, Plan(input(100, 1, desired)))
			benchmarkPlan(b, input(100, 1, changeOnePercent(desired), c.list()...))
		})
	}
}

func benchmarkPlan(b *testing.B, in Input) {
	b.ReportAllocs()
	var r Result
	for b.Loop() {
		r = Plan(in)
	}
	if r.Err != nil {
		b.Fatal(r.Err)
	}
	b.ReportMetric(float64(r.Writes()), "writes/op")
}

func changeOnePercent(desired []discoveryv1.Endpoint) []discoveryv1.Endpoint {
	n := len(desired)
	step := 100 * 3 // one in 300 removed, one in 300 flipped, n/300 added
	var out []discoveryv1.Endpoint
	for i, e := range desired {
		switch i % step {
		case 0:
			continue
		case 1:
			e.Conditions.Ready = ptr.To(false)
		}
		out = append(out, e)
	}
	return append(out, eps(n, n+n/step)...)
}
