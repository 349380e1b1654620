package locality

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
)

// bytes turns fuzz input into choices; past the end it answers zero, so every input describes
// a complete case.
type bytes struct{ data []byte }

func (b *bytes) next() int {
	if len(b.data) == 0 {
		return 0
	}
	v := b.data[0]
	b.data = b.data[1:]
	return int(v)
}

// fuzzCase decodes clusters (some with zones, some without endpoints or CPU), options, and a
// previous allocation: either the allocation of a perturbed copy of the clusters (what the
// controller reads back after endpoints came and went) or arbitrary shares.
func fuzzCase(data []byte) ([]Cluster, []ClusterAllocation, Options) {
	b := &bytes{data: data}
	threshold := float64(b.next()%80) / 100
	opts := Options{OverloadThreshold: threshold, ReturnThreshold: threshold * float64(b.next()%5) / 4}
	history := b.next() % 3
	clusters := make([]Cluster, 1+b.next()%6)
	for i := range clusters {
		c := Cluster{Name: fmt.Sprintf("c%d", i)}
		if zones := b.next() % 4; zones > 0 {
			for z := range zones {
				c.Zones = append(c.Zones, Zone{Name: fmt.Sprintf("z%d", z), MilliCPU: int64(b.next()%12) * 500, Endpoints: b.next() % 9})
			}
		} else {
			c.MilliCPU = int64(b.next()%40) * 250
			c.Endpoints = b.next() % 30
		}
		clusters[i] = c
	}
	var previous []ClusterAllocation
	switch history {
	case 1:
		before := make([]Cluster, len(clusters))
		for i, c := range clusters {
			c.Zones = slices.Clone(c.Zones)
			if len(c.Zones) > 0 {
				c.Zones[0].Endpoints = max(0, c.Zones[0].Endpoints+b.next()%7-3)
			} else {
				c.Endpoints = max(0, c.Endpoints+b.next()%11-5)
			}
			before[i] = c
		}
		previous = Allocate(before, nil, opts).Clusters
	case 2:
		for _, c := range clusters {
			p := ClusterAllocation{Cluster: c.Name, Local: float64(b.next()%5) / 4}
			if p.Local < 1 {
				p.Spill = []Share{{To: clusters[b.next()%len(clusters)].Name, Share: 1 - p.Local}}
			}
			previous = append(previous, p)
		}
	}
	return clusters, previous, opts
}

func FuzzAllocate(f *testing.F) {
	f.Add([]byte{25, 2, 0, 3, 0, 32, 2, 0, 32, 8, 0, 16, 20})
	f.Add([]byte{25, 2, 1, 2, 0, 32, 2, 0, 32, 8})
	f.Add([]byte{10, 4, 2, 4, 2, 6, 1, 4, 5, 0, 3, 0, 8, 7, 0, 0, 0, 1, 9})
	f.Add([]byte{0, 0, 1, 5, 0, 39, 1, 0, 1, 29, 0, 20, 3, 3, 11, 0, 0, 8, 5, 5, 0, 12, 12, 7})
	f.Add([]byte("a ClusterSet of five clusters with zones, failovers and a previous allocation"))
	f.Fuzz(func(t *testing.T, data []byte) {
		clusters, previous, opts := fuzzCase(data)
		res := Allocate(clusters, previous, opts)
		if res.Mode != None {
			checkResult(t, clusters, previous, opts, res)
		}
		if previous == nil && res.Mode != None {
			checkMinimalSpill(t, clusters, opts, res)
		}

		// Determinism: the same input in another order gives the very same result.
		reversed := slices.Clone(clusters)
		slices.Reverse(reversed)
		prevReversed := slices.Clone(previous)
		slices.Reverse(prevReversed)
		if again := Allocate(reversed, prevReversed, opts); !reflect.DeepEqual(again, res) {
			t.Fatalf("input order changed the result:\n%+v\n%+v", res, again)
		}

		// Hysteresis is a fixed point: the allocation fed back is kept exactly.
		if res.Mode == Local || res.Mode == Spill {
			again := Allocate(clusters, res.Clusters, opts)
			if again.Changed || !reflect.DeepEqual(again.Clusters, res.Clusters) {
				t.Fatalf("feeding the allocation back changed it:\n%+v\n%+v", res.Clusters, again.Clusters)
			}
		}
	})
}

// checkMinimalSpill holds a fresh allocation to the smallest spill: a cluster spills only when
// its endpoints cannot carry its traffic, then exactly the excess, and the ClusterSet's total
// spill is the sum of those excesses.
func checkMinimalSpill(t *testing.T, clusters []Cluster, opts Options, res Result) {
	t.Helper()
	var cpu int64
	endpoints := 0
	for _, c := range clusters {
		w, n := totals(c)
		cpu += w
		endpoints += n
	}
	if cpu == 0 {
		return
	}
	var total float64
	for _, c := range clusters {
		w, _ := totals(c)
		a, _ := res.For(c.Name)
		minimal := need(c, cpu, endpoints, opts.OverloadThreshold)
		if math.Abs((1-a.Local)-minimal) > tolerance {
			t.Fatalf("%s spills %v, the minimum is %v", c.Name, 1-a.Local, minimal)
		}
		total += minimal * float64(w)
	}
	if math.Abs(total/float64(cpu)-res.Spilled) > tolerance {
		t.Fatalf("total spill %v, the minimum is %v", res.Spilled, total/float64(cpu))
	}
}
