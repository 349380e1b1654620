package tiersim

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// A hand case: region 0 holds c00 (8 cores, one endpoint) and c01 (8 cores, none), region 1
// holds c02 (8 cores, 7 endpoints). Fair share 24000/8 = 3000.
func handCase() Case {
	c := Case{Regions: 2, Region: []int{0, 0, 1}, Clusters: []locality.Cluster{
		{Name: "c00", MilliCPU: 8000, Endpoints: 1}, {Name: "c01", MilliCPU: 8000}, {Name: "c02", MilliCPU: 8000, Endpoints: 7}}}
	c.Clusters[0].Tiers = [][]string{{"c00"}, {"c00", "c01"}}
	c.Clusters[1].Tiers = [][]string{{"c01"}, {"c00", "c01"}}
	c.Clusters[2].Tiers = [][]string{{"c02"}, {"c02"}}
	return c
}

func TestScoresOfAHandCase(t *testing.T) {
	c := handCase()
	outcomes, ok, err := scoreAll(&c, locality.DefaultOptions())
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// The KEP default sends region 0's 16000 to c00's one endpoint: 5.33 fair shares, and keeps
	// two thirds of the traffic in region.
	if kep := outcomes[2]; !near(kep.MaxLoad, 16000.0/3000) || !near(kep.InRegion, 1) {
		t.Fatalf("KEP default: %+v", kep)
	}
	// fleetslice: c00 keeps 3750 (1.25 fair shares), region 0 has no more room, the rest goes
	// to c02: in region 3750 + 8000 of 24000.
	ours := outcomes[3]
	if !near(ours.MaxLoad, 1.25) || !near(ours.InRegion, (3750.0+8000)/24000) {
		t.Fatalf("fleetslice: %+v", ours)
	}
	if cost := RegionBoundCost(&c, 0.25); !near(cost, (16000-3750)/24000.0) || !near(outcomes[2].InRegion-ours.InRegion, cost) {
		t.Fatalf("region bound cost %v", cost)
	}
}

func TestSamplerStaysInTheDocumentedSpace(t *testing.T) {
	s := NewSampler(DefaultSeed)
	for range 2000 {
		c := s.Next()
		n := len(c.Clusters)
		if n < MinClusters || n > MaxClusters || c.Regions < MinRegions || c.Regions > MaxRegions || c.Regions > n {
			t.Fatalf("%d clusters in %d regions", n, c.Regions)
		}
		seen := make([]bool, c.Regions)
		for i, cl := range c.Clusters {
			seen[c.Region[i]] = true
			if cl.Endpoints < 0 || cl.Endpoints >= MaxEndpoints || cl.MilliCPU <= 0 || len(cl.Tiers) != 2 || cl.Tiers[0][0] != cl.Name {
				t.Fatalf("cluster out of the space: %+v", cl)
			}
		}
		for r, ok := range seen {
			if !ok {
				t.Fatalf("region %d is empty", r)
			}
		}
	}
}

// The claims docs/topology.md makes about the simulator, on a smaller sample than the
// documented run (the same seed's first cases).
func TestRunKeepsFleetslicesPromises(t *testing.T) {
	cases := 1500
	if testing.Short() {
		cases = 300
	}
	res, err := Run(context.Background(), Config{Cases: cases})
	if err != nil {
		t.Fatal(err)
	}
	ours, kep := res.Stat(Fleetslice), res.Stat(KEPDefault)
	if ours.OverBound != 0 || kep.OverBound < res.Feasible/2 {
		t.Fatalf("over the bound: fleetslice %d, KEP default %d of %d", ours.OverBound, kep.OverBound, res.Feasible)
	}
	if res.InClusterDiffers != 0 || res.BelowFlat != 0 || res.GapNotCost != 0 {
		t.Fatalf("in-cluster differs %d, below fleetslice without tiers in region %d, gap to the KEP default not the bound's cost %d",
			res.InClusterDiffers, res.BelowFlat, res.GapNotCost)
	}
	if res.Mean(ours.InRegion) <= res.Mean(res.Stat(Flat).InRegion) || res.Example == nil {
		t.Fatalf("tiers keep no more in region than without (%v, %v), or no example", res.Mean(ours.InRegion), res.Mean(res.Stat(Flat).InRegion))
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
		if _, err := Run(context.Background(), Config{Cases: 100}); err != nil {
			b.Fatal(err)
		}
	}
}
