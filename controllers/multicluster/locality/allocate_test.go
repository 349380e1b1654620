package locality

import (
	"math"
	"testing"
)

func cluster(name string, cpu int64, endpoints int) Cluster {
	return Cluster{Name: name, MilliCPU: cpu, Endpoints: endpoints}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// spillOf returns the share c sends to cluster to.
func spillOf(c ClusterAllocation, to string) float64 {
	for _, s := range c.Spill {
		if s.To == to {
			return s.Share
		}
	}
	return 0
}

func TestAllocate(t *testing.T) {
	type want struct {
		local map[string]float64
		spill map[[2]string]float64 // from, to
		load  map[string]float64
	}
	tests := []struct {
		name     string
		clusters []Cluster
		previous []ClusterAllocation
		opts     Options
		mode     Mode
		reason   Reason
		want     want
	}{
		{
			name:     "equal clusters keep everything",
			clusters: []Cluster{cluster("a", 8000, 5), cluster("b", 8000, 5)},
			mode:     Local,
			want:     want{local: map[string]float64{"a": 1, "b": 1}, load: map[string]float64{"a": 1, "b": 1}},
		},
		{
			name: "4-4-3 in equal clusters stays local: the small one is 22% over, under 25%",
			clusters: []Cluster{
				cluster("a", 4000, 4), cluster("b", 4000, 4), cluster("c", 4000, 3),
			},
			mode: Local,
			want: want{local: map[string]float64{"a": 1, "b": 1, "c": 1}, load: map[string]float64{"c": 11.0 / 9}},
		},
		{
			name:     "a small cluster keeps what its endpoints carry at the bound and spills the rest",
			clusters: []Cluster{cluster("small", 8000, 2), cluster("big", 8000, 8)},
			mode:     Spill,
			want: want{
				local: map[string]float64{"small": 0.5, "big": 1},
				spill: map[[2]string]float64{{"small", "big"}: 0.5},
				load:  map[string]float64{"small": 1.25, "big": 0.9375},
			},
		},
		{
			name: "failover: no ready endpoints sends everything to the most spare capacity",
			clusters: []Cluster{
				cluster("a", 4000, 0), cluster("b", 4000, 4), cluster("c", 4000, 8),
			},
			mode: Spill,
			want: want{
				local: map[string]float64{"a": 0, "b": 1, "c": 1},
				spill: map[[2]string]float64{{"a", "c"}: 1},
				load:  map[string]float64{"b": 1, "c": 1},
			},
		},
		{
			name: "spill is levelled: receivers end at the same load per endpoint",
			clusters: []Cluster{
				cluster("a", 12000, 0), cluster("b", 4000, 6), cluster("c", 4000, 6),
			},
			mode: Spill,
			want: want{
				spill: map[[2]string]float64{{"a", "b"}: 0.5, {"a", "c"}: 0.5},
				load:  map[string]float64{"b": 1, "c": 1},
			},
		},
		{
			name: "a cluster without clients but with endpoints only receives",
			clusters: []Cluster{
				cluster("edge", 0, 6), cluster("core", 6000, 2),
			},
			mode: Spill,
			// fair share 750 per endpoint; core carries 2*1.25*750 = 1875 of its 6000.
			want: want{
				local: map[string]float64{"edge": 1, "core": 1875.0 / 6000},
				load:  map[string]float64{"core": 1.25, "edge": (6000 - 1875.0) / 4500},
			},
		},
		{
			name: "hysteresis: a surplus spill inside the return band is kept",
			// Fair share 16000/11 per endpoint. small can carry 3*1.25 fair shares (needs to
			// spill 0.318) and 3*1.125 within the return band (0.386): the previous 0.35 stays.
			clusters: []Cluster{cluster("small", 8000, 3), cluster("big", 8000, 8)},
			previous: []ClusterAllocation{{Cluster: "small", Local: 0.65, Spill: []Share{{To: "big", Share: 0.35}}}, {Cluster: "big", Local: 1}},
			mode:     Spill,
			want: want{
				local: map[string]float64{"small": 0.65},
				spill: map[[2]string]float64{{"small", "big"}: 0.35},
			},
		},
		{
			name:     "hysteresis: beyond the return band the surplus returns to the minimum",
			clusters: []Cluster{cluster("small", 8000, 3), cluster("big", 8000, 8)},
			previous: []ClusterAllocation{{Cluster: "small", Local: 0.5, Spill: []Share{{To: "big", Share: 0.5}}}, {Cluster: "big", Local: 1}},
			mode:     Spill,
			want:     want{local: map[string]float64{"small": 1 - (1 - 1.25*3*16000.0/11/8000)}},
		},
		{
			name:     "failback: endpoints back, traffic back",
			clusters: []Cluster{cluster("a", 4000, 4), cluster("b", 4000, 4)},
			previous: []ClusterAllocation{{Cluster: "a", Local: 0, Spill: []Share{{To: "b", Share: 1}}}, {Cluster: "b", Local: 1}},
			mode:     Local,
			want:     want{local: map[string]float64{"a": 1, "b": 1}},
		},
		{
			name: "lazy destinations: a previous split that still fits is kept",
			// b has more spare than c, but a's spill went to c before and c still has room.
			clusters: []Cluster{
				cluster("a", 500, 0), cluster("b", 4000, 8), cluster("c", 4000, 6),
			},
			previous: []ClusterAllocation{
				{Cluster: "a", Local: 0, Spill: []Share{{To: "c", Share: 1}}}, {Cluster: "b", Local: 1}, {Cluster: "c", Local: 1},
			},
			mode: Spill,
			want: want{spill: map[[2]string]float64{{"a", "c"}: 1}},
		},
		{
			name: "lazy destinations: a previous split that overloads is re-decided",
			clusters: []Cluster{
				cluster("a", 8000, 0), cluster("b", 4000, 8), cluster("c", 4000, 2),
			},
			previous: []ClusterAllocation{
				{Cluster: "a", Local: 0, Spill: []Share{{To: "c", Share: 1}}}, {Cluster: "b", Local: 1}, {Cluster: "c", Local: 1},
			},
			mode: Spill,
			// Fair share 1600: c is at its bound with its own 4000, so all of a goes to b.
			want: want{
				spill: map[[2]string]float64{{"a", "b"}: 1},
				load:  map[string]float64{"b": 0.9375, "c": 1.25},
			},
		},
		{
			name:     "no endpoints anywhere",
			clusters: []Cluster{cluster("a", 4000, 0), cluster("b", 4000, 0)},
			mode:     None, reason: NoReadyEndpoints,
		},
		{
			name:     "no CPU anywhere spreads over every endpoint",
			clusters: []Cluster{cluster("a", 0, 1), cluster("b", 0, 3)},
			mode:     Spread, reason: InsufficientNodeInfo,
			want: want{
				local: map[string]float64{"a": 0.25, "b": 0.75},
				spill: map[[2]string]float64{{"a", "b"}: 0.75, {"b", "a"}: 0.25},
			},
		},
		{
			name:     "a repeated cluster is refused",
			clusters: []Cluster{cluster("a", 1, 1), cluster("a", 1, 1)},
			mode:     None, reason: InvalidInput,
		},
		{
			name:     "zones that disagree with the cluster's totals are refused",
			clusters: []Cluster{{Name: "a", MilliCPU: 5, Zones: []Zone{{Name: "z", MilliCPU: 4, Endpoints: 1}}}},
			mode:     None, reason: InvalidInput,
		},
		{
			name:     "a return threshold above the overload threshold is refused",
			clusters: []Cluster{cluster("a", 1, 1)},
			opts:     Options{OverloadThreshold: 0.1, ReturnThreshold: 0.2},
			mode:     None, reason: InvalidOptions,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts == (Options{}) {
				opts = DefaultOptions()
			}
			res := Allocate(tc.clusters, tc.previous, opts)
			if res.Mode != tc.mode || res.Reason != tc.reason {
				t.Fatalf("mode %s reason %q (%s), want %s %q", res.Mode, res.Reason, res.Message, tc.mode, tc.reason)
			}
			if res.Mode != None {
				checkResult(t, tc.clusters, tc.previous, opts, res)
			}
			for name, want := range tc.want.local {
				if c, _ := res.For(name); !near(c.Local, want) {
					t.Errorf("%s keeps %v, want %v", name, c.Local, want)
				}
			}
			for key, want := range tc.want.spill {
				if c, _ := res.For(key[0]); !near(spillOf(c, key[1]), want) {
					t.Errorf("%s sends %v to %s, want %v (%+v)", key[0], spillOf(c, key[1]), key[1], want, c.Spill)
				}
			}
			for name, want := range tc.want.load {
				if c, _ := res.For(name); !near(c.Load, want) {
					t.Errorf("%s's load %v, want %v", name, c.Load, want)
				}
			}
		})
	}
}

func TestZonesKeepTrafficInZoneWithinTheBound(t *testing.T) {
	// Fair share 16000/12 per endpoint. Zone a has one endpoint for 4000 of demand: it keeps
	// 1.25 fair shares and sends the rest to zone b of the same cluster, never to cluster y.
	x := Cluster{Name: "x", Zones: []Zone{{Name: "a", MilliCPU: 4000, Endpoints: 1}, {Name: "b", MilliCPU: 4000, Endpoints: 5}}}
	y := cluster("y", 8000, 6)
	res := Allocate([]Cluster{x, y}, nil, DefaultOptions())
	checkResult(t, []Cluster{x, y}, nil, DefaultOptions(), res)
	c, _ := res.For("x")
	if c.Local != 1 || len(c.Zones) != 2 {
		t.Fatalf("x: %+v", c)
	}
	a, b := c.Zones[0], c.Zones[1]
	fair := 16000.0 / 12
	if !near(a.InZone, 1.25*fair/4000) || len(a.OtherZones) != 1 || !near(a.OtherZones[0].Share, 1-1.25*fair/4000) {
		t.Errorf("zone a: %+v", a)
	}
	if b.InZone != 1 || !near(a.Load, 1.25) {
		t.Errorf("zone b: %+v, a's load %v", b, a.Load)
	}
}

func TestSpillingClusterSplitsItsZonesAndIntake(t *testing.T) {
	x := Cluster{Name: "x", Zones: []Zone{{Name: "a", MilliCPU: 6000, Endpoints: 1}, {Name: "b", MilliCPU: 2000, Endpoints: 1}}}
	y := Cluster{Name: "y", Zones: []Zone{{Name: "a", MilliCPU: 1000, Endpoints: 4}, {Name: "b", MilliCPU: 1000, Endpoints: 0}}}
	clusters := []Cluster{x, y}
	res := Allocate(clusters, nil, DefaultOptions())
	checkResult(t, clusters, nil, DefaultOptions(), res)
	cy, _ := res.For("y")
	if len(cy.Intake) != 1 || cy.Intake[0].To != "a" {
		t.Errorf("y's intake should all land in its only zone with endpoints: %+v", cy.Intake)
	}
	if z := cy.Zones[1]; z.InZone != 0 || len(z.OtherZones) != 1 || z.OtherZones[0].To != "a" {
		t.Errorf("y's zone b has no endpoints, its clients use zone a: %+v", z)
	}
}

func TestFeedingBackChangesNothing(t *testing.T) {
	clusters := []Cluster{cluster("a", 7000, 1), cluster("b", 3000, 9), cluster("c", 5000, 0), cluster("d", 100, 3)}
	first := Allocate(clusters, nil, DefaultOptions())
	if !first.Changed {
		t.Fatal("a first allocation must be written")
	}
	again := Allocate(clusters, first.Clusters, DefaultOptions())
	if again.Changed {
		t.Fatalf("feeding the allocation back changed it:\n%+v\n%+v", first.Clusters, again.Clusters)
	}
}
