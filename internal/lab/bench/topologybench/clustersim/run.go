package clustersim

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// slack keeps float noise in loads and shares from counting as a broken promise.
const slack = 1e-9

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
	Policy                         string
	InCluster, InZone, MaxOverload Metric
	// OverBound counts cases where some endpoint expects more than (1+threshold) times its
	// fair share.
	OverBound int
}

// Bins of local-first's largest overload, the picture's x axis: how lopsided a case is.
const (
	BinWidth = 0.25
	Bins     = 12 // the last bin holds everything from (Bins-1)*BinWidth up
)

// Bin is the per-policy means over the cases of one bin.
type Bin struct {
	Cases     int
	InCluster map[string]float64 // sum over the bin's cases, per policy
	Overload  map[string]float64
}

// Result is a whole run.
type Result struct {
	Config
	Feasible, Infeasible int
	Stats                []Stats // in Policies order
	// BelowSpread counts cases where fleetslice kept less traffic in cluster than spread;
	// BeyondBoundCost cases where local-first kept more in cluster than fleetslice by more than
	// BoundCost; BoundCost sums the bound's cost over the cases.
	BelowSpread, BeyondBoundCost int
	BoundCost                    Metric
	// Worst is a case with fleetslice's largest overload, for the report.
	Worst     Case
	WorstLoad float64
	Bins      [Bins]Bin
	Elapsed   time.Duration
}

// Mean is m's mean over the feasible cases.
func (r *Result) Mean(m Metric) float64 {
	if r.Feasible == 0 {
		return 0
	}
	return m.Sum / float64(r.Feasible)
}

// Run samples and scores cfg.Cases cases.
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
	for b := range res.Bins {
		res.Bins[b] = Bin{InCluster: map[string]float64{}, Overload: map[string]float64{}}
	}
	sampler := NewSampler(cfg.Seed)
	var c Case
	var s scorer
	threshold := cfg.Options.OverloadThreshold
	outcomes := make([]Outcome, len(Policies))
	for i := range cfg.Cases {
		if i%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		sampler.Next(&c)
		s.reset(&c)
		if !s.feasible() {
			res.Infeasible++
			continue
		}
		alloc := locality.Allocate(c.Clusters, nil, cfg.Options)
		if alloc.Mode != locality.Local && alloc.Mode != locality.Spill {
			return nil, fmt.Errorf("case %d: a feasible case gave %s (%s: %s)", i, alloc.Mode, alloc.Reason, alloc.Message)
		}
		outcomes[0] = s.score(s.spread)
		outcomes[1] = s.score(s.localFirst)
		outcomes[2] = s.score(s.failover)
		outcomes[3] = s.score(s.fleetslice(&alloc))
		res.add(&c, outcomes, threshold)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

func (r *Result) add(c *Case, outcomes []Outcome, threshold float64) {
	first := r.Feasible == 0
	r.Feasible++
	for i, o := range outcomes {
		st := &r.Stats[i]
		st.InCluster.add(o.InCluster, first)
		st.InZone.add(o.InZone, first)
		st.MaxOverload.add(o.MaxOverload, first)
		if o.MaxOverload > threshold+slack {
			st.OverBound++
		}
	}
	spread, local, ours := outcomes[0], outcomes[1], outcomes[3]
	cost := BoundCost(c, threshold)
	r.BoundCost.add(cost, first)
	if ours.InCluster < spread.InCluster-slack {
		r.BelowSpread++
	}
	if local.InCluster-ours.InCluster > cost+slack {
		r.BeyondBoundCost++
	}
	if first || ours.MaxOverload > r.WorstLoad {
		r.WorstLoad = ours.MaxOverload
		r.Worst = clone(c)
	}
	b := min(Bins-1, int(math.Max(0, local.MaxOverload)/BinWidth))
	bin := &r.Bins[b]
	bin.Cases++
	for i, o := range outcomes {
		bin.InCluster[Policies[i]] += o.InCluster
		bin.Overload[Policies[i]] += o.MaxOverload
	}
}

func clone(c *Case) Case {
	out := Case{Clusters: make([]locality.Cluster, len(c.Clusters))}
	for i, cl := range c.Clusters {
		cl.Zones = append([]locality.Zone(nil), cl.Zones...)
		out.Clusters[i] = cl
	}
	return out
}

// Describe renders a case compactly: per cluster its zones as CPU cores/endpoints.
func (c Case) Describe() string {
	out := ""
	for i, cl := range c.Clusters {
		if i > 0 {
			out += "; "
		}
		out += cl.Name + ":"
		for j, z := range cl.Zones {
			if j > 0 {
				out += ","
			}
			out += fmt.Sprintf(" %s %d cores/%d endpoints", z.Name, z.MilliCPU/1000, z.Endpoints)
		}
	}
	return out
}
