package clustersim

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

func TestScoresOfAHandCase(t *testing.T) {
	// c0 has half the CPU but 2 of 10 endpoints, all in z0; c1 has 8 over two zones.
	c := Case{Clusters: []locality.Cluster{
		{Name: "c0", Zones: []locality.Zone{{Name: "z0", MilliCPU: 8000, Endpoints: 2}}},
		{Name: "c1", Zones: []locality.Zone{{Name: "z0", MilliCPU: 4000, Endpoints: 4}, {Name: "z1", MilliCPU: 4000, Endpoints: 4}}},
	}}
	var s scorer
	s.reset(&c)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if o := s.score(s.spread); !near(o.MaxOverload, 0) || !near(o.InCluster, 0.5*0.2+0.5*0.8) {
		t.Errorf("spread: %+v", o)
	}
	// local-first: c0's 2 endpoints carry half the traffic: 2.5 fair shares, 150% over.
	if o := s.score(s.localFirst); !near(o.MaxOverload, 1.5) || !near(o.InCluster, 1) {
		t.Errorf("local-first: %+v", o)
	}
	alloc := locality.Allocate(c.Clusters, nil, locality.DefaultOptions())
	o := s.score(s.fleetslice(&alloc))
	// c0 keeps 2 x 1.25 fair shares (of 1600 each) = 4000 of its 8000.
	if !near(o.MaxOverload, 0.25) || !near(o.InCluster, 0.5*0.5+0.5) {
		t.Errorf("fleetslice: %+v", o)
	}
	if cost := BoundCost(&c, 0.25); !near(cost, 0.25) {
		t.Errorf("bound cost %v, want 0.25", cost)
	}
}

func TestSamplerStaysInTheDocumentedSpace(t *testing.T) {
	s := NewSampler(DefaultSeed)
	var c Case
	for range 10_000 {
		s.Next(&c)
		if n := len(c.Clusters); n < MinClusters || n > MaxClusters {
			t.Fatalf("%d clusters", n)
		}
		for _, cl := range c.Clusters {
			var cpu int64
			if len(cl.Zones) < 1 || len(cl.Zones) > MaxZones {
				t.Fatalf("%d zones", len(cl.Zones))
			}
			for _, z := range cl.Zones {
				cpu += z.MilliCPU
				if z.Endpoints < 0 || z.Endpoints > MaxEndpoints || z.MilliCPU > MaxNodes*16*1000 {
					t.Fatalf("zone out of the space: %+v", z)
				}
			}
			if cpu == 0 {
				t.Fatalf("cluster without CPU: %+v", cl)
			}
		}
	}
}

func TestRunKeepsFleetslicesPromises(t *testing.T) {
	cases := 20_000
	if testing.Short() {
		cases = 2_000
	}
	res, err := Run(context.Background(), Config{Cases: cases})
	if err != nil {
		t.Fatal(err)
	}
	ours := res.Stats[3]
	if ours.Policy != Fleetslice || ours.OverBound != 0 || res.BelowSpread != 0 || res.BeyondBoundCost != 0 {
		t.Fatalf("fleetslice over bound %d, below spread %d, beyond the bound's cost %d", ours.OverBound, res.BelowSpread, res.BeyondBoundCost)
	}
	// Fresh allocations spill exactly the excess, so the gap to local-first is the bound's cost.
	gap := res.Mean(res.Stats[1].InCluster) - res.Mean(ours.InCluster)
	if math.Abs(gap-res.Mean(res.BoundCost)) > 1e-9 {
		t.Fatalf("local-first keeps %.6f more in cluster, the bound's cost is %.6f", gap, res.Mean(res.BoundCost))
	}
	if res.Mean(ours.InCluster) <= res.Mean(res.Stats[0].InCluster) {
		t.Fatalf("fleetslice keeps no more in cluster than spread")
	}
	again, err := Run(context.Background(), Config{Cases: cases})
	if err != nil {
		t.Fatal(err)
	}
	res.Elapsed, again.Elapsed = 0, 0
	if !reflect.DeepEqual(res, again) {
		t.Fatal("two runs with the same seed differ")
	}
}

func BenchmarkRun(b *testing.B) {
	for b.Loop() {
		if _, err := Run(context.Background(), Config{Cases: 1000}); err != nil {
			b.Fatal(err)
		}
	}
}
