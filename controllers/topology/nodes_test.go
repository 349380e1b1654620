package topology

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, zone, cpu string, ready bool, labels ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	for _, l := range labels {
		n.Labels[l] = ""
	}
	if cpu != "" {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	return n
}

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
				node("n1", "b", "2", true), node("n2", "a", "500m", true), node("n3", "b", "1500m", true),
				node("cp", "a", "8", true, LabelControlPlane), node("old-master", "a", "8", true, "node-role.kubernetes.io/master"),
				node("down", "c", "8", false), node("down-no-zone", "", "", false),
			},
			want: []Zone{{Name: "a", MilliCPU: 500}, {Name: "b", MilliCPU: 3500}},
		},
		{name: "ready Node without zone", nodes: []*corev1.Node{node("n1", "a", "1", true), node("n2", "", "1", true)},
			reason: InsufficientNodeInfo},
		{name: "ready Node without CPU", nodes: []*corev1.Node{node("n1", "a", "1", true), node("n2", "b", "", true)},
			reason: InsufficientNodeInfo},
		{name: "ready Node with zero CPU", nodes: []*corev1.Node{node("n1", "a", "1", true), node("n2", "b", "0", true)},
			reason: InsufficientNodeInfo},
		{name: "no Nodes", reason: InsufficientNodeInfo},
		{name: "one zone", nodes: []*corev1.Node{node("n1", "a", "1", true), node("n2", "a", "1", true), nil},
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
