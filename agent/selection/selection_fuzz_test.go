package selection

import (
	"fmt"
	"testing"
)

// decodeEndpoints turns fuzz bytes into endpoints: each endpoint takes three
// bytes (conditions, node/zone choice, hint choice) so the fuzzer explores
// every combination of flags and hints over a small world of 3 nodes in 2
// zones.
func decodeEndpoints(data []byte) []Endpoint {
	nodes := []string{"node-a", "node-b", "node-c", ""}
	zoneNames := []string{"zone-a", "zone-b", "zone-c", ""}
	var eps []Endpoint
	for i := 0; i+2 < len(data) && len(eps) < 64; i += 3 {
		cond, where, hint := data[i], data[i+1], data[i+2]
		e := Endpoint{
			Address:     fmt.Sprintf("ep-%d", len(eps)),
			Ready:       cond&1 != 0,
			Serving:     cond&2 != 0,
			Terminating: cond&4 != 0,
			NodeName:    nodes[where%4],
			Zone:        zoneNames[(where>>2)%4],
		}
		if hint&1 != 0 {
			e.ZoneHints = []string{zoneNames[(hint>>1)%4]}
		}
		if hint&8 != 0 {
			e.NodeHints = []string{nodes[(hint>>4)%4]}
		}
		eps = append(eps, e)
	}
	return eps
}

func FuzzSelect(f *testing.F) {
	f.Add(byte(0), byte(0), []byte{3, 0, 1, 3, 5, 3})
	f.Add(byte(7), byte(1), []byte{6, 0, 9, 1, 1, 25, 3, 2, 3})
	f.Add(byte(2), byte(2), []byte{6, 0, 0, 6, 1, 0})
	f.Add(byte(5), byte(3), []byte{})
	f.Fuzz(func(t *testing.T, policy, nodeChoice byte, data []byte) {
		svc := Service{
			InternalTrafficLocal: policy&1 != 0,
			ExternalTrafficLocal: policy&2 != 0,
			ExternallyAccessible: policy&4 != 0,
		}
		node := []Node{
			{Name: "node-a", Zone: "zone-a"},
			{Name: "node-b", Zone: "zone-b"},
			{Name: "node-c"},
			{Zone: "zone-a"},
		}[nodeChoice%4]
		eps := decodeEndpoints(data)
		res := Select(svc, eps, node)

		inputs := map[string]bool{}
		for _, e := range eps {
			inputs[e.Address] = true
		}
		for _, list := range [][]Endpoint{res.Cluster, res.Local} {
			seen := map[string]bool{}
			for _, e := range list {
				if !inputs[e.Address] || seen[e.Address] {
					t.Fatalf("selected %q, which is not an input endpoint or is selected twice", e.Address)
				}
				seen[e.Address] = true
			}
		}
		anyReady, anyUsable := false, false
		for _, e := range eps {
			anyReady = anyReady || e.Ready
			anyUsable = anyUsable || e.Ready || (e.Serving && e.Terminating)
		}
		if res.HasAnyEndpoints != anyUsable {
			t.Fatalf("HasAnyEndpoints = %v with usable=%v", res.HasAnyEndpoints, anyUsable)
		}
		if (res.Cluster != nil) != svc.UsesClusterEndpoints() {
			t.Fatalf("cluster list presence %v, uses cluster %v", res.Cluster != nil, svc.UsesClusterEndpoints())
		}
		if (res.Local != nil) != svc.UsesLocalEndpoints() {
			t.Fatalf("local list presence %v, uses local %v", res.Local != nil, svc.UsesLocalEndpoints())
		}
		for _, e := range res.Cluster {
			if anyReady && !e.Ready {
				t.Fatalf("cluster list holds non-ready %+v although ready endpoints exist", e)
			}
			if !e.Ready && !(e.Serving && e.Terminating) {
				t.Fatalf("cluster list holds unusable %+v", e)
			}
		}
		if svc.UsesClusterEndpoints() && anyUsable && len(res.Cluster) == 0 {
			t.Fatal("usable endpoints exist but the cluster list is empty")
		}
		if res.Topology != ModeNone && !anyReady {
			t.Fatalf("topology %q without ready endpoints", res.Topology)
		}
		if res.Topology == ModePreferSameZone && node.Zone == "" {
			t.Fatal("zone hints used on a node without a zone")
		}
		hasLocal := false
		for _, e := range res.Local {
			if e.NodeName != node.Name || node.Name == "" {
				t.Fatalf("local list holds remote %+v", e)
			}
			if !e.Ready && !(e.Serving && e.Terminating) {
				t.Fatalf("local list holds unusable %+v", e)
			}
			hasLocal = true
		}
		if hasLocal && !res.HasLocalEndpoints {
			t.Fatal("local endpoints selected but HasLocalEndpoints is false")
		}
	})
}

func BenchmarkSelect(b *testing.B) {
	eps := make([]Endpoint, 100)
	for i := range eps {
		zone := []string{"zone-a", "zone-b", "zone-c"}[i%3]
		eps[i] = Endpoint{
			Address: fmt.Sprintf("10.0.%d.%d:80", i/250, i%250), Ready: true, Serving: true,
			NodeName: fmt.Sprintf("node-%d", i%20), Zone: zone, ZoneHints: []string{zone},
		}
	}
	node := Node{Name: "node-1", Zone: "zone-b"}
	b.ReportAllocs()
	for b.Loop() {
		res := Select(externalLoc, eps, node)
		if len(res.Cluster) == 0 {
			b.Fatal("empty selection")
		}
	}
}
