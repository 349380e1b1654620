package topology

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

func TestZonesFromNodes(t *testing.T) {
	tests := []struct {
		name   string
		nodes  []*corev1.Node
		want   []Zone
		reason Reason
	}{
		{
			name: "sums ready workers per zone, skips control plane and not-ready Nodes",
			nodes: []*corev1.Node{
				builders.MakeNode("n1").Zone("b").CPU("2").Ready(true).Obj(),
				builders.MakeNode("n2").Zone("a").CPU("500m").Ready(true).Obj(),
				builders.MakeNode("n3").Zone("b").CPU("1500m").Ready(true).Obj(),
				builders.MakeNode("cp").Zone("a").Label(LabelControlPlane, "").CPU("8").Ready(true).Obj(),
				builders.MakeNode("old-master").Zone("a").Label("node-role.kubernetes.io/master", "").CPU("8").Ready(true).Obj(),
				builders.MakeNode("down").Zone("c").CPU("8").Ready(false).Obj(),
				builders.MakeNode("down-no-zone").Ready(false).Obj(),
			},
			want: []Zone{{Name: "a", MilliCPU: 500}, {Name: "b", MilliCPU: 3500}},
		},
		{name: "ready Node without zone", nodes: []*corev1.Node{builders.MakeNode("n1").Zone("a").CPU("1").Ready(true).Obj(),
			builders.MakeNode("n2").CPU("1").Ready(true).Obj()},
			reason: InsufficientNodeInfo},
		{name: "ready Node without CPU", nodes: []*corev1.Node{builders.MakeNode("n1").Zone("a").CPU("1").Ready(true).Obj(),
			builders.MakeNode("n2").Zone("b").Ready(true).Obj()},
			reason: InsufficientNodeInfo},
		{name: "ready Node with zero CPU", nodes: []*corev1.Node{builders.MakeNode("n1").Zone("a").CPU("1").Ready(true).Obj(),
			builders.MakeNode("n2").Zone("b").CPU("0").Ready(true).Obj()},
			reason: InsufficientNodeInfo},
		{name: "no Nodes", reason: InsufficientNodeInfo},
		{name: "one zone", nodes: []*corev1.Node{builders.MakeNode("n1").Zone("a").CPU("1").Ready(true).Obj(),
			builders.MakeNode("n2").Zone("a").CPU("1").Ready(true).Obj(), nil},
			reason: NodesReadyInOneZoneOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			zones, reason, msg := ZonesFromNodes(tc.nodes)
			if reason != tc.reason {
				t.Fatalf("reason %q (%s), want %q", reason, msg, tc.reason)
			}
			if reason != "" {
				if msg == "" {
					t.Fatal("a reason needs a message")
				}
				return
			}
			if len(zones) != len(tc.want) {
				t.Fatalf("zones %v, want %v", zones, tc.want)
			}
			for i := range zones {
				if zones[i] != tc.want[i] {
					t.Fatalf("zones %v, want %v", zones, tc.want)
				}
			}
		})
	}
}
