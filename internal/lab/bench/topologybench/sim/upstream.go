package sim

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/endpointslice/topologycache"
)

// zoneNames name the simulated zones for the Kubernetes objects upstream's code reads.
var zoneNames = [Zones]string{"zone-a", "zone-b", "zone-c"}

var readyTrue = true

// upstream drives k8s.io/endpointslice's TopologyCache as a library, the way its EndpointSlice
// reconciler does for a Service annotated topology-mode Auto: SetNodes with the cluster's Nodes,
// then AddHints with the slices about to be written. Nodes, endpoints and slices are allocated
// once and rewritten in place for every case; only upstream's own hint objects are allocated.
type upstream struct {
	cache     *topologycache.TopologyCache
	logger    logr.Logger
	nodes     [Zones]*corev1.Node
	lastNodes [Zones]int
	pool      []discovery.Endpoint
	slices    []*discovery.EndpointSlice
	location  []int8 // zone index of pool[i]
}

func newUpstream() *upstream {
	u := &upstream{cache: topologycache.NewTopologyCache(), logger: logr.Discard()}
	for z := range Zones {
		u.nodes[z] = &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: zoneNames[z], Labels: map[string]string{corev1.LabelTopologyZone: zoneNames[z]}},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
	}
	return u
}

// setNodes gives each zone one Node whose CPU is the case's Node count in cores: upstream's
// zone ratios are CPU shares, which then equal the published Node shares.
func (u *upstream) setNodes(nodes [Zones]int) {
	if nodes == u.lastNodes {
		return
	}
	u.lastNodes = nodes
	list := make([]*corev1.Node, Zones)
	for z := range Zones {
		u.nodes[z].Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewMilliQuantity(int64(nodes[z])*1000, resource.DecimalSI),
		}
		list[z] = u.nodes[z]
	}
	u.cache.SetNodes(u.logger, list)
}

// fill lays the case's endpoints out as a fresh Service's slices of at most SliceCapacity
// endpoints, zone by zone, with no hints.
func (u *upstream) fill(endpoints [Zones]int) {
	e := endpoints[0] + endpoints[1] + endpoints[2]
	if cap(u.pool) < e {
		u.pool = make([]discovery.Endpoint, e)
		u.location = make([]int8, e)
	}
	u.pool, u.location = u.pool[:e], u.location[:e]
	i := 0
	for z := range Zones {
		for range endpoints[z] {
			u.pool[i] = discovery.Endpoint{Conditions: discovery.EndpointConditions{Ready: &readyTrue}, Zone: &zoneNames[z]}
			u.location[i] = int8(z)
			i++
		}
	}
	n := ceilDiv(e, SliceCapacity)
	for len(u.slices) < n {
		u.slices = append(u.slices, &discovery.EndpointSlice{AddressType: discovery.AddressTypeIPv4})
	}
	for s := range n {
		u.slices[s].Endpoints = u.pool[s*SliceCapacity : min(e, (s+1)*SliceCapacity)]
	}
}

func (u *upstream) Plan(c Case, plan *Plan) bool {
	u.setNodes(c.Nodes)
	u.fill(c.Endpoints)
	n := ceilDiv(c.TotalEndpoints(), SliceCapacity)
	si := &topologycache.SliceInfo{
		ServiceKey:  "default/simulated",
		AddressType: discovery.AddressTypeIPv4,
		ToCreate:    u.slices[:n:n],
	}
	u.cache.AddHints(u.logger, si)
	return readPlan(u.pool, u.location, plan)
}

// readPlan counts hints the way kube-proxy reads them: if any ready endpoint lacks a zone hint,
// nobody uses hints.
func readPlan(pool []discovery.Endpoint, location []int8, plan *Plan) bool {
	*plan = Plan{}
	for i := range pool {
		h := pool[i].Hints
		if h == nil || len(h.ForZones) == 0 {
			return false
		}
		z := zoneIndex(h.ForZones[0].Name)
		if z < 0 {
			return false
		}
		plan[int(location[i])*Zones+z]++
	}
	return true
}

func zoneIndex(name string) int {
	for z := range Zones {
		if zoneNames[z] == name {
			return z
		}
	}
	return -1
}
