package topology

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// LabelControlPlane marks Nodes that serve no workload traffic, so their CPU does not count;
// LabelMasterRole is its legacy spelling, which counts the same.
const (
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	LabelMasterRole   = "node-role.kubernetes.io/master"
)

// ZonesFromNodes sums the allocatable CPU of the ready, non-control-plane Nodes per zone, sorted
// by zone name. Like upstream it refuses to guess: one such Node without a zone label or without
// allocatable CPU means no zones at all, with InsufficientNodeInfo, because a partial picture
// would skew every zone's share. Fewer than two zones give NodesReadyInOneZoneOnly.
func ZonesFromNodes(nodes []*corev1.Node) ([]Zone, Reason, string) {
	byZone := map[string]int64{}
	for _, node := range nodes {
		if node == nil || !nodeCounts(node) {
			continue
		}
		zone := node.Labels[corev1.LabelTopologyZone]
		if zone == "" {
			return nil, InsufficientNodeInfo, fmt.Sprintf("node %q has no %s label", node.Name, corev1.LabelTopologyZone)
		}
		cpu, ok := node.Status.Allocatable[corev1.ResourceCPU]
		if !ok || cpu.MilliValue() <= 0 {
			return nil, InsufficientNodeInfo, fmt.Sprintf("node %q has no allocatable CPU", node.Name)
		}
		byZone[zone] += cpu.MilliValue()
	}
	zones := make([]Zone, 0, len(byZone))
	for name, cpu := range byZone {
		zones = append(zones, Zone{Name: name, MilliCPU: cpu})
	}
	sort.Slice(zones, func(i, j int) bool { return zones[i].Name < zones[j].Name })
	switch len(zones) {
	case 0:
		return nil, InsufficientNodeInfo, "no ready worker Node"
	case 1:
		return zones, NodesReadyInOneZoneOnly, fmt.Sprintf("ready worker Nodes only in zone %q", zones[0].Name)
	}
	return zones, "", ""
}

// nodeCounts reports whether a Node sends Service traffic: it is Ready and not a control-plane
// Node (the legacy master role label counts as control plane too).
func nodeCounts(node *corev1.Node) bool {
	if _, ok := node.Labels[LabelControlPlane]; ok {
		return false
	}
	if _, ok := node.Labels[LabelMasterRole]; ok {
		return false
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeSendsTraffic reports whether a Node's CPU counts as demand: it is Ready and not a
// control-plane Node. Exported so that the multi-cluster allocation sums a cluster's demand by
// the very rule zone hints use.
func NodeSendsTraffic(node *corev1.Node) bool { return node != nil && nodeCounts(node) }
