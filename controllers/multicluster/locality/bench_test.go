package locality

import (
	"fmt"
	"testing"
)

// BenchmarkAllocate measures one Service's decision, which the controller makes on every
// change of a member's endpoints or CPU: fresh, fed back (the common steady state), and with
// zones.
func BenchmarkAllocate(b *testing.B) {
	for _, size := range []int{3, 10, 50} {
		clusters := make([]Cluster, size)
		zoned := make([]Cluster, size)
		for i := range clusters {
			// Every third cluster is short of endpoints and one has none: spill and failover.
			n := 10 + i%7
			if i%3 == 0 {
				n = 2
			}
			if i == 1 {
				n = 0
			}
			clusters[i] = cluster(fmt.Sprintf("cluster-%02d", i), int64(4000+1000*(i%5)), n)
			zoned[i] = Cluster{Name: clusters[i].Name, Zones: []Zone{
				{Name: "a", MilliCPU: 2000, Endpoints: n / 2}, {Name: "b", MilliCPU: int64(2000 + 1000*(i%5)), Endpoints: n - n/2},
			}}
		}
		opts := DefaultOptions()
		b.Run(fmt.Sprintf("fresh-%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Allocate(clusters, nil, opts)
			}
		})
		previous := Allocate(clusters, nil, opts).Clusters
		b.Run(fmt.Sprintf("unchanged-%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Allocate(clusters, previous, opts)
			}
		})
		b.Run(fmt.Sprintf("zones-%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Allocate(zoned, nil, opts)
			}
		})
	}
}
