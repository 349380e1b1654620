package sim

import (
	"slices"
	"strconv"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/endpointslice/topologycache"
)

const simulatedService = "default/simulated"

// upstreamReplayer keeps a Service's EndpointSlices and a TopologyCache across events and calls
// upstream the way its EndpointSlice controller does: on an endpoint change the touched slice is
// passed for update (or a new slice for creation) and the others as unchanged; on a Node change
// the cache gets the Nodes and the Service is synced only if GetOverloadedServices names it.
type upstreamReplayer struct {
	cache  *topologycache.TopologyCache
	logger logr.Logger
	nodes  [Zones]*corev1.Node
	state  []*discovery.EndpointSlice
	hints  map[int]int
}

func newUpstreamReplayer() *upstreamReplayer {
	u := &upstreamReplayer{logger: logr.Discard()}
	base := newUpstream() // reuse its Node objects
	u.nodes = base.nodes
	return u
}

func (u *upstreamReplayer) setNodes(nodes [Zones]int) {
	list := make([]*corev1.Node, Zones)
	for z := range Zones {
		u.nodes[z].Status.Allocatable = corev1.ResourceList{
			corev1.ResourceCPU: *resource.NewMilliQuantity(int64(nodes[z])*1000, resource.DecimalSI),
		}
		list[z] = u.nodes[z]
	}
	u.cache.SetNodes(u.logger, list)
}

func newSimEndpoint(ep simEndpoint) discovery.Endpoint {
	return discovery.Endpoint{
		Addresses:  []string{strconv.Itoa(ep.id)},
		Conditions: discovery.EndpointConditions{Ready: &readyTrue},
		Zone:       &zoneNames[ep.zone],
	}
}

func (u *upstreamReplayer) reset(w *world) {
	u.cache = topologycache.NewTopologyCache()
	u.setNodes(w.nodes)
	u.state = u.state[:0]
	var create []*discovery.EndpointSlice
	for i, ep := range w.endpoints {
		if i%SliceCapacity == 0 {
			create = append(create, &discovery.EndpointSlice{AddressType: discovery.AddressTypeIPv4})
		}
		s := create[len(create)-1]
		s.Endpoints = append(s.Endpoints, newSimEndpoint(ep))
	}
	u.sync(create, nil, nil)
	u.hints = u.read()
}

func (u *upstreamReplayer) step(w *world, ev Event) (map[int]int, int) {
	switch ev.Kind {
	case AddEndpoint:
		u.addEndpoint(simEndpoint{id: ev.ID, zone: ev.Zone})
	case RemoveEndpoint:
		u.removeEndpoint(ev.ID)
	case AddNode, RemoveNode:
		u.setNodes(w.nodes)
		if slices.Contains(u.cache.GetOverloadedServices(), simulatedService) {
			u.sync(nil, nil, u.state)
		}
	}
	next := u.read()
	changed := countChanged(w, ev, u.hints, next)
	u.hints = next
	return next, changed
}

// addEndpoint puts the endpoint where upstream's placement would for a single addition: into
// the fullest slice with room, or into a new slice.
func (u *upstreamReplayer) addEndpoint(ep simEndpoint) {
	best := -1
	for i, s := range u.state {
		if len(s.Endpoints) < SliceCapacity && (best < 0 || len(s.Endpoints) > len(u.state[best].Endpoints)) {
			best = i
		}
	}
	if best < 0 {
		created := &discovery.EndpointSlice{AddressType: discovery.AddressTypeIPv4,
			Endpoints: []discovery.Endpoint{newSimEndpoint(ep)}}
		u.sync([]*discovery.EndpointSlice{created}, nil, u.state)
		return
	}
	updated := u.state[best].DeepCopy()
	updated.Endpoints = append(updated.Endpoints, newSimEndpoint(ep))
	u.sync(nil, []*discovery.EndpointSlice{updated}, without(u.state, best))
}

func (u *upstreamReplayer) removeEndpoint(id int) {
	addr := strconv.Itoa(id)
	for i, s := range u.state {
		for j := range s.Endpoints {
			if s.Endpoints[j].Addresses[0] != addr {
				continue
			}
			if len(s.Endpoints) == 1 {
				u.sync(nil, nil, without(u.state, i)) // the emptied slice is deleted
				return
			}
			updated := s.DeepCopy()
			updated.Endpoints = append(updated.Endpoints[:j], updated.Endpoints[j+1:]...)
			u.sync(nil, []*discovery.EndpointSlice{updated}, without(u.state, i))
			return
		}
	}
}

func without(list []*discovery.EndpointSlice, i int) []*discovery.EndpointSlice {
	out := make([]*discovery.EndpointSlice, 0, len(list)-1)
	out = append(out, list[:i]...)
	return append(out, list[i+1:]...)
}

// sync runs AddHints and keeps whatever upstream returns plus what it left unchanged.
func (u *upstreamReplayer) sync(create, update, unchanged []*discovery.EndpointSlice) {
	si := &topologycache.SliceInfo{
		ServiceKey:  simulatedService,
		AddressType: discovery.AddressTypeIPv4,
		ToCreate:    create,
		ToUpdate:    update,
		Unchanged:   slices.Clone(unchanged),
	}
	u.cache.AddHints(u.logger, si)
	next := make([]*discovery.EndpointSlice, 0, len(si.ToCreate)+len(si.ToUpdate)+len(si.Unchanged))
	next = append(next, si.ToCreate...)
	next = append(next, si.ToUpdate...)
	u.state = append(next, si.Unchanged...)
}

// read returns the hints by endpoint id as kube-proxy would use them: none if any endpoint
// lacks one.
func (u *upstreamReplayer) read() map[int]int {
	hints := map[int]int{}
	for _, s := range u.state {
		for _, ep := range s.Endpoints {
			if ep.Hints == nil || len(ep.Hints.ForZones) == 0 {
				return nil
			}
			id, err := strconv.Atoi(ep.Addresses[0])
			z := zoneIndex(ep.Hints.ForZones[0].Name)
			if err != nil || z < 0 {
				return nil
			}
			hints[id] = z
		}
	}
	if len(hints) == 0 {
		return nil
	}
	return hints
}
