package selection

import (
	"fmt"
	"reflect"
	"testing"
)

// ep builds an endpoint; flags is a subset of "r" (ready), "s" (serving),
// "t" (terminating).
func ep(addr, node, flags string, zoneHints, nodeHints []string) Endpoint {
	e := Endpoint{Address: addr, NodeName: node, ZoneHints: zoneHints, NodeHints: nodeHints}
	for _, f := range flags {
		switch f {
		case 'r':
			e.Ready = true
		case 's':
			e.Serving = true
		case 't':
			e.Terminating = true
		}
	}
	return e
}

func zones(z ...string) []string { return z }

func addresses(eps []Endpoint) []string {
	if eps == nil {
		return nil
	}
	out := make([]string, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.Address)
	}
	return out
}

var (
	cluster     = Service{}
	internalLoc = Service{InternalTrafficLocal: true}
	nodePort    = Service{ExternallyAccessible: true}
	externalLoc = Service{ExternalTrafficLocal: true, ExternallyAccessible: true}
	bothLocal   = Service{InternalTrafficLocal: true, ExternalTrafficLocal: true, ExternallyAccessible: true}
	// externalTrafficPolicy Local on a ClusterIP-only Service has no effect.
	externalLocNoPorts = Service{ExternalTrafficLocal: true}
	nodeA              = Node{Name: "node-a", Zone: "zone-a"}
)

func TestSelect(t *testing.T) {
	tests := []struct {
		name        string
		svc         Service
		node        Node
		endpoints   []Endpoint
		wantCluster []string
		wantLocal   []string
		wantMode    Mode
		wantAny     bool
		wantHasLoc  bool
	}{
		{
			name:        "no endpoints at all",
			svc:         cluster,
			node:        nodeA,
			wantCluster: []string{},
		},
		{
			name: "cluster policy without hints uses every ready endpoint",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", nil, nil),
				ep("2", "node-b", "rs", nil, nil),
				ep("3", "node-c", "", nil, nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "zone hints used when all ready endpoints have them and one is for our zone",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones("zone-a"), nil),
				ep("2", "node-b", "rs", zones("zone-b"), nil),
				ep("3", "node-c", "rs", zones("zone-a", "zone-c"), nil),
			},
			wantCluster: []string{"1", "3"},
			wantMode:    ModePreferSameZone,
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "zone hints ignored when one ready endpoint lacks them",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones("zone-a"), nil),
				ep("2", "node-b", "rs", nil, nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "a not-ready endpoint without hints does not disable hints",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-b", "rs", zones("zone-a"), nil),
				ep("2", "node-b", "rs", zones("zone-b"), nil),
				ep("3", "node-a", "", nil, nil),
			},
			wantCluster: []string{"1"},
			wantMode:    ModePreferSameZone,
			wantAny:     true,
		},
		{
			name: "zone hints ignored when none is for our zone",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-b", "rs", zones("zone-b"), nil),
				ep("2", "node-c", "rs", zones("zone-c"), nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true,
		},
		{
			name: "node without zone label ignores zone hints",
			svc:  cluster, node: Node{Name: "node-a"},
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones("zone-a"), nil),
				ep("2", "node-b", "rs", zones("zone-b"), nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "node without zone label ignores even an empty-string zone hint",
			svc:  cluster, node: Node{Name: "node-a"},
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones(""), nil),
				ep("2", "node-b", "rs", zones("zone-b"), nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "node hints take precedence over zone hints",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones("zone-a"), zones("node-a")),
				ep("2", "node-b", "rs", zones("zone-a"), zones("node-b")),
				ep("3", "node-c", "rs", zones("zone-b"), zones("node-c")),
			},
			wantCluster: []string{"1"},
			wantMode:    ModePreferSameNode,
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "node hints for other nodes only fall back to zone hints",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-b", "rs", zones("zone-a"), zones("node-b")),
				ep("2", "node-c", "rs", zones("zone-b"), zones("node-c")),
			},
			wantCluster: []string{"1"},
			wantMode:    ModePreferSameZone,
			wantAny:     true,
		},
		{
			name: "incomplete node hints fall back to zone hints",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones("zone-a"), zones("node-a")),
				ep("2", "node-b", "rs", zones("zone-a"), nil),
				ep("3", "node-c", "rs", zones("zone-b"), nil),
			},
			wantCluster: []string{"1", "2"},
			wantMode:    ModePreferSameZone,
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "node hints usable on a node without a zone label",
			svc:  cluster, node: Node{Name: "node-a"},
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", nil, zones("node-a")),
				ep("2", "node-b", "rs", nil, zones("node-b")),
			},
			wantCluster: []string{"1"},
			wantMode:    ModePreferSameNode,
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "no ready endpoints falls back to serving terminating ones",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "st", nil, nil),
				ep("2", "node-b", "t", nil, nil),
				ep("3", "node-c", "st", nil, nil),
				ep("4", "node-c", "", nil, nil),
			},
			wantCluster: []string{"1", "3"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "terminating fallback ignores hints",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-b", "st", zones("zone-b"), nil),
				ep("2", "node-c", "st", zones("zone-a"), nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true,
		},
		{
			name: "ready endpoints win over serving terminating ones",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "st", nil, nil),
				ep("2", "node-b", "rs", nil, nil),
			},
			wantCluster: []string{"2"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "nothing usable: no endpoints, reject",
			svc:  cluster, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "t", nil, nil),
				ep("2", "node-b", "", nil, nil),
			},
			wantCluster: []string{},
		},
		{
			name: "internalTrafficPolicy Local keeps only this node's ready endpoints",
			svc:  internalLoc, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones("zone-b"), nil),
				ep("2", "node-b", "rs", zones("zone-a"), nil),
				ep("3", "node-a", "st", nil, nil),
			},
			wantLocal: []string{"1"},
			wantAny:   true, wantHasLoc: true,
		},
		{
			name: "internalTrafficPolicy Local with only remote endpoints",
			svc:  internalLoc, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-b", "rs", nil, nil),
			},
			wantLocal: []string{},
			wantAny:   true,
		},
		{
			name: "local policy falls back to local serving terminating endpoints",
			svc:  internalLoc, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "st", nil, nil),
				ep("2", "node-b", "rs", nil, nil),
				ep("3", "node-a", "t", nil, nil),
			},
			wantLocal: []string{"1"},
			wantAny:   true, wantHasLoc: true,
		},
		{
			name: "NodePort with cluster policy uses only the cluster list",
			svc:  nodePort, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", nil, nil),
				ep("2", "node-b", "rs", nil, nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "externalTrafficPolicy Local needs both lists",
			svc:  externalLoc, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", nil, nil),
				ep("2", "node-b", "rs", nil, nil),
			},
			wantCluster: []string{"1", "2"},
			wantLocal:   []string{"1"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "externalTrafficPolicy Local: local list ignores hints, cluster list honours them",
			svc:  externalLoc, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", zones("zone-b"), nil),
				ep("2", "node-b", "rs", zones("zone-a"), nil),
			},
			wantCluster: []string{"2"},
			wantLocal:   []string{"1"},
			wantMode:    ModePreferSameZone,
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "externalTrafficPolicy Local without NodePorts or external IPs is cluster only",
			svc:  externalLocNoPorts, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-a", "rs", nil, nil),
				ep("2", "node-b", "rs", nil, nil),
			},
			wantCluster: []string{"1", "2"},
			wantAny:     true, wantHasLoc: true,
		},
		{
			name: "both policies Local with a NodePort still need the cluster list",
			svc:  bothLocal, node: nodeA,
			endpoints: []Endpoint{
				ep("1", "node-b", "rs", nil, nil),
			},
			wantCluster: []string{"1"},
			wantLocal:   []string{},
			wantAny:     true,
		},
		{
			name: "node with empty name hosts nothing",
			svc:  internalLoc, node: Node{Zone: "zone-a"},
			endpoints: []Endpoint{
				ep("1", "", "rs", nil, nil),
			},
			wantLocal: []string{},
			wantAny:   true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Select(tc.svc, tc.endpoints, tc.node)
			if g := addresses(got.Cluster); !reflect.DeepEqual(g, tc.wantCluster) {
				t.Errorf("cluster = %#v, want %#v", g, tc.wantCluster)
			}
			if g := addresses(got.Local); !reflect.DeepEqual(g, tc.wantLocal) {
				t.Errorf("local = %#v, want %#v", g, tc.wantLocal)
			}
			if got.Topology != tc.wantMode {
				t.Errorf("topology = %q, want %q", got.Topology, tc.wantMode)
			}
			if got.HasAnyEndpoints != tc.wantAny {
				t.Errorf("HasAnyEndpoints = %v, want %v", got.HasAnyEndpoints, tc.wantAny)
			}
			if got.HasLocalEndpoints != tc.wantHasLoc {
				t.Errorf("HasLocalEndpoints = %v, want %v", got.HasLocalEndpoints, tc.wantHasLoc)
			}
		})
	}
}

func TestPolicyUsage(t *testing.T) {
	tests := []struct {
		svc                 Service
		usesCluster, usesLo bool
	}{
		{cluster, true, false},
		{internalLoc, false, true},
		{nodePort, true, false},
		{externalLoc, true, true},
		{externalLocNoPorts, true, false},
		{bothLocal, true, true},
		{Service{InternalTrafficLocal: true, ExternallyAccessible: true}, true, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%+v", tc.svc), func(t *testing.T) {
			if got := tc.svc.UsesClusterEndpoints(); got != tc.usesCluster {
				t.Errorf("UsesClusterEndpoints = %v, want %v", got, tc.usesCluster)
			}
			if got := tc.svc.UsesLocalEndpoints(); got != tc.usesLo {
				t.Errorf("UsesLocalEndpoints = %v, want %v", got, tc.usesLo)
			}
		})
	}
}
