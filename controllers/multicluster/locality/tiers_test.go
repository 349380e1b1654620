package locality

import (
	"reflect"
	"testing"
)

// regions builds three clusters in two regions, A (a1, a2) and B (b1), of 8 CPUs each, with the
// given ready endpoints, each with the tiers of the KEP's first story without the continent:
// its own cluster, then its region.
func regions(a1, a2, b1 int) []Cluster {
	region := map[string][]string{"a1": {"a1", "a2"}, "a2": {"a1", "a2"}, "b1": {"b1"}}
	out := []Cluster{cluster("a1", 8000, a1), cluster("a2", 8000, a2), cluster("b1", 8000, b1)}
	for i := range out {
		out[i].Tiers = [][]string{{out[i].Name}, region[out[i].Name]}
	}
	return out
}

func TestAllocateTiers(t *testing.T) {
	type row map[string]float64 // destination -> share, the own cluster included
	tests := []struct {
		name     string
		clusters []Cluster
		previous []ClusterAllocation
		opts     Options
		want     map[string]row
	}{
		{
			name:     "preference: every cluster can carry its own traffic and keeps it",
			clusters: regions(4, 4, 4),
			want:     map[string]row{"a1": {"a1": 1}, "a2": {"a2": 1}, "b1": {"b1": 1}},
		},
		{
			// 9 endpoints, fair share 24000/9: a1's one carries 1.25 x 2666.67 = 3333.33 of its
			// 8000, and a2 has 5333.33 spare: all of a1's rest stays in region A, although b1
			// has as much room (Allocate would split it between a2 and b1).
			name:     "spill stays in the region while the region can carry it",
			clusters: regions(1, 4, 4),
			want:     map[string]row{"a1": {"a1": 5.0 / 12, "a2": 7.0 / 12}, "a2": {"a2": 1}, "b1": {"b1": 1}},
		},
		{
			// 12 endpoints, fair share 2000: a1 and a2 keep 2500 each, region A has no room
			// left, so the rest goes beyond, to b1.
			name:     "spill leaves the region when the region is full",
			clusters: regions(1, 1, 10),
			want:     map[string]row{"a1": {"a1": 0.3125, "b1": 0.6875}, "a2": {"a2": 0.3125, "b1": 0.6875}, "b1": {"b1": 1}},
		},
		{
			// a1 has no endpoint: a2 takes what fits within the bound (15000 - 8000 = 7000 of
			// a1's 8000), the last 1000 goes beyond the region.
			name:     "failover to the region, then beyond, each within the bound",
			clusters: regions(0, 4, 4),
			want:     map[string]row{"a1": {"a2": 7.0 / 8, "b1": 1.0 / 8}, "a2": {"a2": 1}, "b1": {"b1": 1}},
		},
		{
			// a1 spilled 5% to a2 before; now its 3 endpoints (of 11, fair 2181.8) could carry
			// 1.25 x 3 x 2181.8 = 8181.8 >= 8000, but at the return threshold they would carry
			// only 1.125 x 3 x 2181.8 = 7363.6, 92% of its traffic: its 95% still loads them
			// above 1 + 0.125, so the previous row stays (Allocate's rule, level by level).
			name:     "hysteresis: a returning cluster keeps its previous row within the return band",
			clusters: regions(3, 4, 4),
			previous: []ClusterAllocation{{Cluster: "a1", Local: 0.95, Spill: []Share{{To: "a2", Share: 0.05}}}},
			want:     map[string]row{"a1": {"a1": 0.95, "a2": 0.05}, "a2": {"a2": 1}, "b1": {"b1": 1}},
		},
		{
			name:     "hysteresis: beyond the return band the cluster takes its traffic back at once",
			clusters: regions(4, 4, 4),
			previous: []ClusterAllocation{{Cluster: "a1", Local: 0.75, Spill: []Share{{To: "a2", Share: 0.25}}}},
			want:     map[string]row{"a1": {"a1": 1}, "a2": {"a2": 1}, "b1": {"b1": 1}},
		},
		{
			// c prefers the GPU cluster g, which is not its own: g's own clients come first, c
			// sends what g has room for (1.25 x 12 x 16000/16 = 15000 - 8000 = 7000) and keeps
			// the rest at home, its next level.
			name: "a first tier without the own cluster: the tier first, then home",
			clusters: []Cluster{
				{Name: "c", MilliCPU: 8000, Endpoints: 4, Tiers: [][]string{{"g"}}},
				{Name: "g", MilliCPU: 8000, Endpoints: 12, Tiers: [][]string{{"g"}}},
			},
			want: map[string]row{"c": {"g": 7.0 / 8, "c": 1.0 / 8}, "g": {"g": 1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			if opts == (Options{}) {
				opts = DefaultOptions()
			}
			res := AllocateTiers(tc.clusters, tc.previous, opts)
			checkTiers(t, tc.clusters, tc.previous, opts, res, tc.previous == nil)
			for name, want := range tc.want {
				got, ok := res.For(name)
				if !ok {
					t.Fatalf("no row for %s", name)
				}
				have := row{}
				if got.Local > 0 {
					have[name] = got.Local
				}
				for _, s := range got.Spill {
					have[s.To] = s.Share
				}
				if len(have) != len(want) {
					t.Fatalf("%s sends %v, want %v", name, have, want)
				}
				for d, v := range want {
					if !near(have[d], v) {
						t.Fatalf("%s sends %v, want %v", name, have, want)
					}
				}
			}
		})
	}
}

// Without tiers AllocateTiers is Allocate: each cluster keeps what it can, the rest levels.
func TestAllocateTiersWithoutTiersIsAllocate(t *testing.T) {
	for _, clusters := range [][]Cluster{
		{cluster("a", 8000, 5), cluster("b", 8000, 5)},
		{cluster("small", 8000, 2), cluster("big", 8000, 8)},
		{cluster("a", 12000, 0), cluster("b", 4000, 6), cluster("c", 4000, 6)},
		{cluster("a", 4000, 0), cluster("b", 4000, 4), cluster("c", 4000, 8)},
	} {
		flat := Allocate(clusters, nil, DefaultOptions())
		tiered := AllocateTiers(clusters, nil, DefaultOptions())
		sameRows(t, flat, tiered)
	}
}

func TestFirstReady(t *testing.T) {
	// Region A's only ready endpoint is a1's one: the KEP's default sends all of a1's and a2's
	// traffic to it (first tier with a ready endpoint), whatever it can carry.
	res := FirstReady(regions(1, 0, 10), nil, DefaultOptions())
	a1, _ := res.For("a1")
	a2, _ := res.For("a2")
	if a1.Local != 1 || len(a2.Spill) != 1 || a2.Spill[0] != (Share{To: "a1", Share: 1}) {
		t.Fatalf("a1 %+v, a2 %+v: want both at a1", a1, a2)
	}
	// 16000 of 24000 CPU on one of 11 endpoints: 7.33 fair shares.
	if !near(a1.Load, 16000/(24000.0/11)) || !near(res.MaxLoad, a1.Load) {
		t.Fatalf("a1's load %v, max %v", a1.Load, res.MaxLoad)
	}
	// No tier with a ready endpoint: every cluster's, evenly.
	none := regions(0, 0, 4)
	none[0].Tiers = [][]string{{"a1"}}
	res = FirstReady(none, nil, DefaultOptions())
	if a1, _ := res.For("a1"); len(a1.Spill) != 1 || a1.Spill[0] != (Share{To: "b1", Share: 1}) {
		t.Fatalf("a1 %+v: want the fallback to b1", a1)
	}
	// Fed back, nothing changes.
	if again := FirstReady(none, res.Clusters, DefaultOptions()); again.Changed || !reflect.DeepEqual(again.Clusters, res.Clusters) {
		t.Fatalf("fed back: %+v", again)
	}
}
