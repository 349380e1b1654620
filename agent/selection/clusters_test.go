package selection

import (
	"fmt"
	"math"
	"testing"
)

func cep(cluster, zone string, ready bool) Endpoint {
	return Endpoint{Cluster: cluster, Zone: zone, Ready: ready, Serving: ready}
}

// sharesByCluster sums the result per cluster (and per cluster/zone).
func sharesByCluster(out []Weighted) (map[string]float64, map[string]float64) {
	c, z := map[string]float64{}, map[string]float64{}
	for _, w := range out {
		c[w.Endpoint.Cluster] += w.Share
		z[w.Endpoint.Cluster+"/"+w.Endpoint.Zone] += w.Share
	}
	return c, z
}

func TestWeigh(t *testing.T) {
	a := Node{Name: "n1", Zone: "z1", Cluster: "a"}
	tests := []struct {
		name      string
		endpoints []Endpoint
		plan      ClusterPlan
		node      Node
		clusters  map[string]float64
		zones     map[string]float64
		failover  bool
	}{
		{
			name:      "local keeps everything in the own cluster",
			endpoints: []Endpoint{cep("a", "z1", true), cep("a", "z2", true), cep("b", "z1", true)},
			plan:      ClusterPlan{Local: 1},
			node:      a,
			clusters:  map[string]float64{"a": 1},
		},
		{
			name:      "spill is weighted across clusters and even inside each",
			endpoints: []Endpoint{cep("a", "z1", true), cep("b", "z1", true), cep("b", "z1", true), cep("c", "z1", true)},
			plan:      ClusterPlan{Local: 0.5, Spill: []Share{{"b", 0.3}, {"c", 0.2}}},
			node:      a,
			clusters:  map[string]float64{"a": 0.5, "b": 0.3, "c": 0.2},
		},
		{
			name:      "own cluster not ready: its share goes to the spill clusters in proportion",
			endpoints: []Endpoint{cep("a", "z1", false), cep("b", "z1", true), cep("c", "z1", true)},
			plan:      ClusterPlan{Local: 0.5, Spill: []Share{{"b", 0.3}, {"c", 0.2}}},
			node:      a,
			clusters:  map[string]float64{"b": 0.6, "c": 0.4},
		},
		{
			name:      "allocation says local but no local endpoint is ready: spread over the others",
			endpoints: []Endpoint{cep("a", "z1", false), cep("b", "z1", true), cep("c", "z1", true), cep("c", "z2", true)},
			plan:      ClusterPlan{Local: 1},
			node:      a,
			clusters:  map[string]float64{"b": 1.0 / 3, "c": 2.0 / 3},
			failover:  true,
		},
		{
			name:      "a spill cluster gone: the rest absorbs it, clusters with share 0 get nothing",
			endpoints: []Endpoint{cep("a", "z1", true), cep("b", "z1", false), cep("c", "z1", true)},
			plan:      ClusterPlan{Local: 0.6, Spill: []Share{{"b", 0.4}}},
			node:      a,
			clusters:  map[string]float64{"a": 1},
		},
		{
			name: "zones: the client zone keeps its in-zone share, the rest goes to the named zone",
			endpoints: []Endpoint{
				cep("a", "z1", true), cep("a", "z2", true), cep("a", "z2", true), cep("b", "z1", true),
			},
			plan: ClusterPlan{Local: 0.8, Spill: []Share{{"b", 0.2}},
				Zones: []ZoneShare{{Zone: "z1", InZone: 0.5, OtherZones: []Share{{"z2", 0.3}}}, {Zone: "z2", InZone: 0.8}}},
			node:     a,
			clusters: map[string]float64{"a": 0.8, "b": 0.2},
			zones:    map[string]float64{"a/z1": 0.5, "a/z2": 0.3, "b/z1": 0.2},
		},
		{
			name:      "zones: the node's zone has no ready endpoint: its in-zone share spreads over the cluster",
			endpoints: []Endpoint{cep("a", "z1", false), cep("a", "z2", true)},
			plan:      ClusterPlan{Local: 1, Zones: []ZoneShare{{Zone: "z1", InZone: 1}}},
			node:      a,
			zones:     map[string]float64{"a/z2": 1},
		},
		{
			name:      "intake: spill to b follows b's zone split",
			endpoints: []Endpoint{cep("b", "z1", true), cep("b", "z2", true), cep("b", "z2", true)},
			plan:      ClusterPlan{Local: 0, Spill: []Share{{"b", 1}}, Intake: map[string][]Share{"b": {{"z1", 0.25}, {"z2", 0.75}}}},
			node:      a,
			zones:     map[string]float64{"b/z1": 0.25, "b/z2": 0.75},
		},
		{
			name:      "endpoints without a source cluster are the node's own",
			endpoints: []Endpoint{cep("", "z1", true), cep("b", "z1", true)},
			plan:      ClusterPlan{Local: 1},
			node:      a,
			clusters:  map[string]float64{"": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, failover := Weigh(tt.endpoints, tt.plan, tt.node)
			if failover != tt.failover {
				t.Errorf("failover %v, want %v", failover, tt.failover)
			}
			clusters, zones := sharesByCluster(out)
			check := func(what string, got, want map[string]float64) {
				if want == nil {
					return
				}
				for k, v := range want {
					if math.Abs(got[k]-v) > 1e-9 {
						t.Errorf("%s %s: got %v, want %v (all: %v)", what, k, got[k], v, got)
					}
				}
				for k, v := range got {
					if _, ok := want[k]; !ok && v > 0 {
						t.Errorf("%s %s: got %v, want nothing", what, k, v)
					}
				}
			}
			check("cluster", clusters, tt.clusters)
			check("zone", zones, tt.zones)
		})
	}
}

func TestWeighNothingReady(t *testing.T) {
	if out, _ := Weigh([]Endpoint{cep("a", "", false)}, ClusterPlan{Local: 1}, Node{Cluster: "a"}); out != nil {
		t.Fatalf("want nil, got %v", out)
	}
}

func TestQuantize(t *testing.T) {
	tests := []struct {
		shares []float64
		want   []uint16
	}{
		{[]float64{0.25, 0.25, 0.25, 0.25}, []uint16{1, 1, 1, 1}},
		{[]float64{0.75, 0.25}, []uint16{3, 1}},
		{[]float64{0.5, 0.25, 0.25, 0}, []uint16{2, 1, 1, 0}},
		{[]float64{0.9999, 0.0001}, []uint16{1000, 1}}, // a tiny positive share keeps one element
		{[]float64{0, 0}, []uint16{1, 1}},
	}
	for _, tt := range tests {
		got := Quantize(tt.shares, DefaultWeightBudget)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Quantize(%v) = %v, want %v", tt.shares, got, tt.want)
		}
	}
}
