// Package tiersim is the cluster simulator for locality in tiers (issue #39, KEP-5939): fleets
// of clusters in regions, each cluster with its own CPU (demand) and ready endpoints
// (capacity), every client cluster's tiers being the KEP's first story without the continent
// (its own cluster, then its region), scored for the share of traffic served in the client's
// cluster and region, and for the largest expected load of one endpoint, under five ways of
// routing a multi-cluster Service:
//
//   - spread: every client spreads over all ready endpoints of the fleet;
//   - local-first: the client's own cluster while any endpoint there is ready, else the fleet;
//   - KEP default: the first tier with a ready endpoint takes everything (locality.FirstReady);
//   - fleetslice: each tier keeps what its endpoints carry within the bound, the least spills
//     to the next (locality.AllocateTiers, what agents follow);
//   - fleetslice without tiers: the same bound with only the own cluster preferred
//     (locality.Allocate, PreferSameCluster before cluster selectors).
//
// Load model, the allocators': a cluster sends traffic in proportion to its CPU, traffic that
// reaches a cluster splits evenly over its ready endpoints, and an endpoint's load is relative
// to the fair share 1/N of the fleet's N ready endpoints.
package tiersim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// The sampled space. Each case draws, independently:
//   - the number of clusters, uniformly from MinClusters..MaxClusters, and of regions from
//     MinRegions..MaxRegions (at most one per cluster); every region gets a cluster, the others
//     land in a region at random;
//   - per cluster, its Nodes from 1..MaxNodes of one size from NodeCores;
//   - per cluster, its ready endpoints log-uniformly from 1..MaxEndpoints (skewed: half the
//     clusters have at most 8), drawn independently of its CPU, and with probability
//     FailedChance none (a failed cluster).
const (
	MinClusters  = 3
	MaxClusters  = 50
	MinRegions   = 2
	MaxRegions   = 5
	MaxNodes     = 10
	MaxEndpoints = 64
	FailedChance = 0.1
)

// NodeCores are the Node sizes a cluster may have, in cores.
var NodeCores = []int64{2, 4, 8, 16}

// DefaultSeed makes every run sample the same fleets.
const DefaultSeed = 1

// Case is one fleet: clusters named c00.. (ascending by position), Region[i] the region of
// cluster i, each cluster's Tiers its own cluster then its region.
type Case struct {
	Clusters []locality.Cluster
	Region   []int
	Regions  int
}

// Sampler draws cases from the space, deterministically for a seed.
type Sampler struct{ rng *rand.Rand }

// NewSampler returns a sampler of the documented space.
func NewSampler(seed uint64) *Sampler {
	return &Sampler{rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))}
}

var names = func() []string {
	out := make([]string, MaxClusters)
	for i := range out {
		out[i] = fmt.Sprintf("c%02d", i)
	}
	return out
}()

// Next draws one case.
func (s *Sampler) Next() Case {
	r := s.rng
	n := MinClusters + r.IntN(MaxClusters-MinClusters+1)
	regions := min(n, MinRegions+r.IntN(MaxRegions-MinRegions+1))
	c := Case{Clusters: make([]locality.Cluster, n), Region: make([]int, n), Regions: regions}
	for i := range n {
		c.Region[i] = i % regions
		if i >= regions {
			c.Region[i] = r.IntN(regions)
		}
		cores := NodeCores[r.IntN(len(NodeCores))]
		nodes := int64(1 + r.IntN(MaxNodes))
		endpoints := 0
		if r.Float64() >= FailedChance {
			endpoints = int(math.Exp(r.Float64() * math.Log(MaxEndpoints)))
		}
		c.Clusters[i] = locality.Cluster{Name: names[i], MilliCPU: nodes * cores * 1000, Endpoints: max(0, endpoints)}
	}
	for i := range n {
		var region []string
		for j := range n {
			if c.Region[j] == c.Region[i] {
				region = append(region, names[j])
			}
		}
		c.Clusters[i].Tiers = [][]string{{names[i]}, region}
	}
	return c
}

// Describe renders a case compactly: per region, its clusters as cores/endpoints.
func (c Case) Describe() string {
	out := ""
	for r := range c.Regions {
		if r > 0 {
			out += "; "
		}
		out += fmt.Sprintf("region %d:", r)
		for i, cl := range c.Clusters {
			if c.Region[i] == r {
				out += fmt.Sprintf(" %s %d/%d", cl.Name, cl.MilliCPU/1000, cl.Endpoints)
			}
		}
	}
	return out
}
