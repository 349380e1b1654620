package clustersim

import (
	"math"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// The policies, in the order the tables show them.
const (
	Spread     = "spread"
	LocalFirst = "local-first"
	Failover   = "failover"
	Fleetslice = "fleetslice"
)

// Policies lists every policy the simulator scores.
var Policies = []string{Spread, LocalFirst, Failover, Fleetslice}

// Outcome is one policy's score on one case.
type Outcome struct {
	// InCluster and InZone are the shares of the ClusterSet's traffic served in the client's
	// own cluster, and in its own zone of its own cluster.
	InCluster, InZone float64
	// MaxOverload is the largest expected load of one endpoint over its fair share, minus one
	// (0.25: 25% over).
	MaxOverload float64
}

// scorer evaluates routes on one case; its buffers are reused from case to case.
type scorer struct {
	c         *Case
	cpu       float64 // total milli-CPU
	endpoints int
	perZone   [][]float64 // traffic reaching each zone of each cluster, in CPU units
	clusterN  []int
}

func (s *scorer) reset(c *Case) {
	s.c = c
	s.cpu, s.endpoints = 0, 0
	s.perZone = s.perZone[:0]
	s.clusterN = s.clusterN[:0]
	for _, cl := range c.Clusters {
		n := 0
		for _, z := range cl.Zones {
			s.cpu += float64(z.MilliCPU)
			n += z.Endpoints
		}
		s.endpoints += n
		s.clusterN = append(s.clusterN, n)
		s.perZone = append(s.perZone, make([]float64, len(cl.Zones)))
	}
}

// feasible reports whether any endpoint is ready: without one no policy can serve anything.
func (s *scorer) feasible() bool { return s.endpoints > 0 }

// emit is how a route hands out the traffic of one client zone: share of it to zone y of
// cluster d.
type emit func(d, y int, share float64)

// score runs route for every client zone and scores where the traffic lands.
func (s *scorer) score(route func(c, z int, out emit)) Outcome {
	for d := range s.perZone {
		clear(s.perZone[d])
	}
	var o Outcome
	for c, cl := range s.c.Clusters {
		for z, zone := range cl.Zones {
			w := float64(zone.MilliCPU)
			if w == 0 {
				continue
			}
			route(c, z, func(d, y int, share float64) {
				v := w * share
				s.perZone[d][y] += v
				if d == c {
					o.InCluster += v
					if y == z {
						o.InZone += v
					}
				}
			})
		}
	}
	o.InCluster /= s.cpu
	o.InZone /= s.cpu
	fair := s.cpu / float64(s.endpoints)
	for d, cl := range s.c.Clusters {
		for y, zone := range cl.Zones {
			if zone.Endpoints > 0 {
				o.MaxOverload = math.Max(o.MaxOverload, s.perZone[d][y]/(float64(zone.Endpoints)*fair)-1)
			}
		}
	}
	return o
}

// spreadOver sends a client's traffic to every endpoint of the clusters allowed, evenly.
func (s *scorer) spreadOver(allowed func(d int) bool, total int, out emit) {
	for d, cl := range s.c.Clusters {
		if !allowed(d) {
			continue
		}
		for y, zone := range cl.Zones {
			if zone.Endpoints > 0 {
				out(d, y, float64(zone.Endpoints)/float64(total))
			}
		}
	}
}

func (s *scorer) spread(_, _ int, out emit) {
	s.spreadOver(func(int) bool { return true }, s.endpoints, out)
}

func (s *scorer) localFirst(c, z int, out emit) {
	if s.clusterN[c] == 0 {
		s.spread(c, z, out)
		return
	}
	s.spreadOver(func(d int) bool { return d == c }, s.clusterN[c], out)
}

func (s *scorer) failover(c, z int, out emit) {
	if n := s.c.Clusters[c].Zones[z].Endpoints; n > 0 {
		out(c, z, 1)
		return
	}
	s.localFirst(c, z, out)
}

// fleetslice follows an allocation the way an agent would: the client zone's in-zone and
// other-zone shares inside its cluster, and each spilled share over the receiving cluster's
// zones by that cluster's intake.
func (s *scorer) fleetslice(res *locality.Result) func(c, z int, out emit) {
	return func(c, z int, out emit) {
		a := &res.Clusters[c]
		za := &a.Zones[z]
		if za.InZone > 0 {
			out(c, z, za.InZone)
		}
		for _, sh := range za.OtherZones {
			out(c, zoneIndex(sh.To), sh.Share)
		}
		for _, sh := range a.Spill {
			d := clusterIndex(sh.To)
			for _, in := range res.Clusters[d].Intake {
				out(d, zoneIndex(in.To), sh.Share*in.Share)
			}
		}
	}
}

// clusterIndex and zoneIndex read the positions back from the names the sampler gives: "c3"
// is cluster 3. Allocate returns clusters sorted by name, which for at most ten is position.
func clusterIndex(name string) int { return int(name[1] - '0') }
func zoneIndex(name string) int    { return int(name[1] - '0') }

// BoundCost is the share of the ClusterSet's traffic that local-first keeps in clusters whose
// endpoints cannot carry it within (1+threshold) of the fair share: what honouring the bound
// must give up against local-first, computed from the closed form, not from the allocator.
func BoundCost(c *Case, threshold float64) float64 {
	var cpu float64
	endpoints := 0
	for _, cl := range c.Clusters {
		for _, z := range cl.Zones {
			cpu += float64(z.MilliCPU)
			endpoints += z.Endpoints
		}
	}
	if endpoints == 0 || cpu == 0 {
		return 0
	}
	var cost float64
	for _, cl := range c.Clusters {
		var w float64
		n := 0
		for _, z := range cl.Zones {
			w += float64(z.MilliCPU)
			n += z.Endpoints
		}
		if n > 0 {
			cost += math.Max(0, w-(1+threshold)*float64(n)*cpu/float64(endpoints))
		}
	}
	return cost / cpu
}
