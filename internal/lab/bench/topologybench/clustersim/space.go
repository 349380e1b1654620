// Package clustersim is the topology simulator with clusters: a ClusterSet of clusters x
// zones, each zone with its own CPU (demand) and ready endpoints (capacity), scored for the
// share of traffic kept in its cluster and in its zone and for the largest expected overload
// of one endpoint, under four ways of routing a multi-cluster Service:
//
//   - spread: every client spreads over all ready endpoints of the ClusterSet (what an
//     imported Service does without a preference);
//   - local-first: a client uses its own cluster while any endpoint there is ready, spread
//     evenly over the cluster, and the whole ClusterSet otherwise;
//   - failover: locality failover by priority: the client's zone while it has a ready
//     endpoint, else its cluster, else the ClusterSet (the usual service-mesh locality
//     load balancing, without capacity awareness);
//   - fleetslice: controllers/multicluster/locality's allocation with zones, followed exactly.
//
// Load model, as in package sim and the allocators: a zone sends traffic in proportion to its
// CPU, traffic that reaches a set of endpoints splits evenly over them, and an endpoint's
// overload is its expected load over the fair share 1/N of the N ready endpoints, minus one.
package clustersim

import (
	"fmt"
	"math/rand/v2"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// The sampled space. Each case draws, independently and uniformly:
//   - the number of clusters from MinClusters..MaxClusters;
//   - per cluster, its zones from 1..MaxZones and one Node size from NodeCores (clusters of
//     one fleet often differ in machine type, so equal Node counts are not equal CPU);
//   - per zone, its Nodes from 0..MaxNodes (a cluster with none gets one in its first zone)
//     and its ready endpoints from 0..MaxEndpoints;
//   - per cluster, with probability FailedChance, all of its endpoints not ready (failover).
//
// Endpoints are drawn independently of CPU, so most cases are lopsided somewhere: that is
// where the policies differ.
const (
	MinClusters  = 2
	MaxClusters  = 5
	MaxZones     = 3
	MaxNodes     = 10
	MaxEndpoints = 20
	FailedChance = 0.1
)

// NodeCores are the Node sizes a cluster may have, in cores.
var NodeCores = []int64{2, 4, 8, 16}

// DefaultSeed makes every run sample the same cases.
const DefaultSeed = 1

// Case is one ClusterSet: clusters named c0.., zones z0.. in each (zone names are per cluster:
// z0 of c0 and z0 of c1 are different places).
type Case struct {
	Clusters []locality.Cluster
}

// Sampler draws cases from the space, deterministically for a seed.
type Sampler struct {
	rng *rand.Rand
}

// NewSampler returns a sampler of the documented space.
func NewSampler(seed uint64) *Sampler {
	return &Sampler{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// clusterNames and zoneNames are built once: a case names its clusters and zones by position.
var (
	clusterNames = names("c", MaxClusters)
	zoneNames    = names("z", MaxZones)
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// Next draws one case, reusing c's slices.
func (s *Sampler) Next(c *Case) {
	r := s.rng
	n := MinClusters + r.IntN(MaxClusters-MinClusters+1)
	c.Clusters = c.Clusters[:0]
	for i := range n {
		cores := NodeCores[r.IntN(len(NodeCores))]
		zones := 1 + r.IntN(MaxZones)
		failed := r.Float64() < FailedChance
		cl := locality.Cluster{Name: clusterNames[i]}
		if i < cap(c.Clusters) {
			cl.Zones = c.Clusters[:i+1][i].Zones[:0]
		}
		nodes := int64(0)
		for z := range zones {
			zn := int64(r.IntN(MaxNodes + 1))
			e := r.IntN(MaxEndpoints + 1)
			if failed {
				e = 0
			}
			nodes += zn
			cl.Zones = append(cl.Zones, locality.Zone{Name: zoneNames[z], MilliCPU: zn * cores * 1000, Endpoints: e})
		}
		if nodes == 0 {
			cl.Zones[0].MilliCPU = cores * 1000
		}
		c.Clusters = append(c.Clusters, cl)
	}
}
