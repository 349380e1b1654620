package topology

import (
	"fmt"
	"testing"
)

func BenchmarkAllocate(b *testing.B) {
	for _, size := range [][3]int{{4, 4, 3}, {1, 10, 100}, {300, 200, 500}} {
		eps := spread(size[0], size[1], size[2])
		zones := zonesCPU(4000, 8000, 12000)
		b.Run(fmt.Sprintf("fresh-%d-%d-%d", size[0], size[1], size[2]), func(b *testing.B) {
			var p Planner
			b.ReportAllocs()
			for b.Loop() {
				AllocateWith(&p, zones, eps, DefaultOptions())
			}
		})
		first := Allocate(zones, eps, DefaultOptions())
		if !first.Enabled {
			continue
		}
		hinted := withHints(eps, first.Hints)
		b.Run(fmt.Sprintf("unchanged-%d-%d-%d", size[0], size[1], size[2]), func(b *testing.B) {
			var p Planner
			o := DefaultOptions()
			o.EnabledBefore = true
			b.ReportAllocs()
			for b.Loop() {
				AllocateWith(&p, zones, hinted, o)
			}
		})
	}
}

func BenchmarkPlanCounts(b *testing.B) {
	var p Planner
	in := CountInput{MilliCPU: []int64{1, 5, 10}, Unhinted: []int{100, 3, 0}, OverloadThreshold: 0.25}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Plan(in); err != nil {
			b.Fatal(err)
		}
	}
}
