package tiersim

import (
	"math"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// The policies, in the order the tables show them.
const (
	Spread     = "spread"
	LocalFirst = "local-first"
	KEPDefault = "KEP default"
	Fleetslice = "fleetslice"
	Flat       = "fleetslice without tiers"
)

// Policies lists every policy the simulator scores.
var Policies = []string{Spread, LocalFirst, KEPDefault, Fleetslice, Flat}

// Outcome is one policy's score on one case.
type Outcome struct {
	// InCluster and InRegion are the shares of the fleet's traffic served in the client's own
	// cluster and in its own region (its cluster included).
	InCluster, InRegion float64
	// MaxLoad is the largest expected load of one endpoint relative to its fair share (1.25:
	// 25% over).
	MaxLoad float64
	// Loads are each cluster's endpoint load, in cluster order (0 without endpoints).
	Loads []float64
}

// routes is where each client cluster sends its traffic: routes[i][d] is the share of client
// i's traffic served by cluster d.
type routes [][]float64

func newRoutes(n int) routes {
	out := make(routes, n)
	for i := range out {
		out[i] = make([]float64, n)
	}
	return out
}

// score evaluates routes on c.
func score(c *Case, r routes) Outcome {
	n := len(c.Clusters)
	var cpu float64
	endpoints := 0
	for _, cl := range c.Clusters {
		cpu += float64(cl.MilliCPU)
		endpoints += cl.Endpoints
	}
	o := Outcome{Loads: make([]float64, n)}
	received := make([]float64, n)
	for i, cl := range c.Clusters {
		w := float64(cl.MilliCPU)
		for d, share := range r[i] {
			v := w * share
			received[d] += v
			if d == i {
				o.InCluster += v
			}
			if c.Region[d] == c.Region[i] {
				o.InRegion += v
			}
		}
	}
	o.InCluster /= cpu
	o.InRegion /= cpu
	fair := cpu / float64(endpoints)
	for d, cl := range c.Clusters {
		if cl.Endpoints > 0 {
			o.Loads[d] = received[d] / (float64(cl.Endpoints) * fair)
			o.MaxLoad = math.Max(o.MaxLoad, o.Loads[d])
		}
	}
	return o
}

// spread sends every client to every ready endpoint evenly.
func spread(c *Case) routes {
	r := newRoutes(len(c.Clusters))
	total := 0
	for _, cl := range c.Clusters {
		total += cl.Endpoints
	}
	for i := range r {
		for d, cl := range c.Clusters {
			r[i][d] = float64(cl.Endpoints) / float64(total)
		}
	}
	return r
}

// localFirst keeps a client at home while its cluster has a ready endpoint, else spreads.
func localFirst(c *Case) routes {
	r := spread(c)
	for i, cl := range c.Clusters {
		if cl.Endpoints > 0 {
			clear(r[i])
			r[i][i] = 1
		}
	}
	return r
}

// follow reads an allocation's rows as routes, the way an agent follows them.
func follow(c *Case, res locality.Result) routes {
	r := newRoutes(len(c.Clusters))
	index := map[string]int{}
	for i, cl := range c.Clusters {
		index[cl.Name] = i
	}
	for _, a := range res.Clusters {
		i := index[a.Cluster]
		r[i][i] = a.Local
		for _, s := range a.Spill {
			r[i][index[s.To]] += s.Share
		}
	}
	return r
}

// RegionBoundCost is the share of the fleet's traffic the KEP default keeps in regions whose
// endpoints cannot carry it within (1+threshold) of the fair share: what honouring the bound
// must give up in region against it, from the closed form, not from the allocator.
func RegionBoundCost(c *Case, threshold float64) float64 {
	var cpu float64
	endpoints := 0
	w := make([]float64, c.Regions)
	n := make([]int, c.Regions)
	for i, cl := range c.Clusters {
		cpu += float64(cl.MilliCPU)
		endpoints += cl.Endpoints
		w[c.Region[i]] += float64(cl.MilliCPU)
		n[c.Region[i]] += cl.Endpoints
	}
	var cost float64
	for r := range c.Regions {
		if n[r] > 0 {
			cost += math.Max(0, w[r]-(1+threshold)*float64(n[r])*cpu/float64(endpoints))
		}
	}
	return cost / cpu
}
