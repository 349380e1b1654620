package tiersim

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// tolerance keeps float noise in shares and loads from counting as a broken promise.
const tolerance = 1e-6

// Config is one simulator run.
type Config struct {
	// Cases to sample; Seed picks them (DefaultSeed when zero).
	Cases int
	Seed  uint64
	// Options are fleetslice's (locality.DefaultOptions when zero).
	Options locality.Options
}

// Metric streams the sum and extremes of one per-case value.
type Metric struct{ Sum, Min, Max float64 }

func (m *Metric) add(v float64, first bool) {
	m.Sum += v
	if first || v < m.Min {
		m.Min = v
	}
	if first || v > m.Max {
		m.Max = v
	}
}

// Stats aggregate one policy over the feasible cases.
type Stats struct {
	Policy                       string
	InCluster, InRegion, MaxLoad Metric
	// OverBound counts cases where some endpoint expects more than (1+threshold) times its
	// fair share.
	OverBound int
}

// Example is the case the picture shows, with every policy's outcome on it.
type Example struct {
	Case     Case
	Outcomes []Outcome // in Policies order
}

// Result is a whole run.
type Result struct {
	Config
	Feasible, Infeasible int
	Stats                []Stats // in Policies order
	// Per-case checks of fleetslice's promises, each counting the cases that break it:
	// InClusterDiffers, fleetslice keeps another in-cluster share than without tiers (the own
	// cluster is the first level of both); BelowFlat, it keeps less in region than without
	// tiers; GapNotCost, the KEP default's in-region share exceeds fleetslice's by other than
	// the region-level bound's cost (closed form).
	InClusterDiffers, BelowFlat, GapNotCost int
	RegionCost                              Metric
	Example                                 *Example
	Elapsed                                 time.Duration
}

// Mean is m's mean over the feasible cases.
func (r *Result) Mean(m Metric) float64 {
	if r.Feasible == 0 {
		return 0
	}
	return m.Sum / float64(r.Feasible)
}

// Stat returns policy's stats.
func (r *Result) Stat(policy string) Stats {
	return r.Stats[slices.Index(Policies, policy)]
}

// Run samples and scores cfg.Cases fleets.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Cases <= 0 {
		return nil, fmt.Errorf("cases %d must be positive", cfg.Cases)
	}
	if cfg.Seed == 0 {
		cfg.Seed = DefaultSeed
	}
	if cfg.Options == (locality.Options{}) {
		cfg.Options = locality.DefaultOptions()
	}
	start := time.Now()
	res := &Result{Config: cfg, Stats: make([]Stats, len(Policies))}
	for i, p := range Policies {
		res.Stats[i].Policy = p
	}
	sampler := NewSampler(cfg.Seed)
	for i := range cfg.Cases {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		c := sampler.Next()
		outcomes, ok, err := scoreAll(&c, cfg.Options)
		if err != nil {
			return nil, fmt.Errorf("case %d (%s): %w", i, c.Describe(), err)
		}
		if !ok {
			res.Infeasible++
			continue
		}
		res.add(&c, outcomes)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// scoreAll routes c by every policy; ok is false without any ready endpoint.
func scoreAll(c *Case, opts locality.Options) ([]Outcome, bool, error) {
	endpoints := 0
	for _, cl := range c.Clusters {
		endpoints += cl.Endpoints
	}
	if endpoints == 0 {
		return nil, false, nil
	}
	flat := make([]locality.Cluster, len(c.Clusters))
	for i, cl := range c.Clusters {
		cl.Tiers = nil
		flat[i] = cl
	}
	allocations := []locality.Result{
		locality.FirstReady(c.Clusters, nil, opts),
		locality.AllocateTiers(c.Clusters, nil, opts),
		locality.Allocate(flat, nil, opts),
	}
	for _, a := range allocations {
		if a.Mode != locality.Local && a.Mode != locality.Spill {
			return nil, false, fmt.Errorf("a feasible case gave %s (%s: %s)", a.Mode, a.Reason, a.Message)
		}
	}
	return []Outcome{
		score(c, spread(c)),
		score(c, localFirst(c)),
		score(c, follow(c, allocations[0])),
		score(c, follow(c, allocations[1])),
		score(c, follow(c, allocations[2])),
	}, true, nil
}

func (r *Result) add(c *Case, outcomes []Outcome) {
	first := r.Feasible == 0
	r.Feasible++
	bound := 1 + r.Options.OverloadThreshold
	for i, o := range outcomes {
		st := &r.Stats[i]
		st.InCluster.add(o.InCluster, first)
		st.InRegion.add(o.InRegion, first)
		st.MaxLoad.add(o.MaxLoad, first)
		if o.MaxLoad > bound+tolerance {
			st.OverBound++
		}
	}
	kep, ours, flat := outcomes[2], outcomes[3], outcomes[4]
	cost := RegionBoundCost(c, r.Options.OverloadThreshold)
	r.RegionCost.add(cost, first)
	if math.Abs(ours.InCluster-flat.InCluster) > tolerance {
		r.InClusterDiffers++
	}
	if ours.InRegion < flat.InRegion-tolerance {
		r.BelowFlat++
	}
	if math.Abs(kep.InRegion-ours.InRegion-cost) > tolerance {
		r.GapNotCost++
	}
	// The picture's fleet: the first readable one (8-16 clusters, 3 regions or more) where the
	// KEP default's failover to the region puts an endpoint at 3 to 8 fair shares, more than
	// local-first does.
	if n := len(c.Clusters); r.Example == nil && n >= 8 && n <= 16 && c.Regions >= 3 && kep.MaxLoad > 3 && kep.MaxLoad < 8 &&
		kep.MaxLoad > outcomes[1].MaxLoad+0.5 {
		r.Example = &Example{Case: *c, Outcomes: outcomes}
	}
}
