package topologybench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench/tiersim"
)

// Case counts of the locality-tiers part: the whole run, and --quick.
const (
	TiersCases      = 100_000
	TiersQuickCases = 5_000
)

type tiersOptions struct {
	cases     int
	threshold float64
	seed      uint64
}

// TiersPart is the `locality-tiers` benchmark: fleets of 3-50 clusters in 2-5 regions scored
// for KEP-5939's default, fleetslice's bounded tiers, spread and local-first (#39).
func TiersPart() bench.Part {
	o := &tiersOptions{threshold: locality.DefaultOptions().OverloadThreshold, seed: tiersim.DefaultSeed}
	return bench.Part{
		Name:  "locality-tiers",
		Title: "Locality in tiers across a fleet: the KEP-5939 default, fleetslice, spread and local-first",
		Flags: func(fs *pflag.FlagSet) {
			fs.IntVar(&o.cases, "tiers-cases", 0, fmt.Sprintf("locality-tiers part: fleets to sample (default %s, %s with --quick)",
				bench.Count(TiersCases), bench.Count(TiersQuickCases)))
			fs.Float64Var(&o.threshold, "tiers-threshold", o.threshold, "locality-tiers part: fleetslice's overload threshold")
			fs.Uint64Var(&o.seed, "tiers-seed", o.seed, "locality-tiers part: seed of the sampled fleets")
		},
		Run: o.run,
	}
}

func (o *tiersOptions) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	cases := o.cases
	if cases <= 0 {
		cases = TiersCases
		if env.Quick {
			cases = TiersQuickCases
		}
	}
	if math.IsNaN(o.threshold) || o.threshold < 0 || o.threshold > 10 {
		return nil, fmt.Errorf("tiers threshold %v must be within 0..10", o.threshold)
	}
	res, err := tiersim.Run(ctx, tiersim.Config{Cases: cases, Seed: o.seed, Options: locality.ForThreshold(o.threshold)})
	if err != nil {
		return nil, err
	}
	env.Logf("locality-tiers: %s fleets in %s", bench.Count(int64(cases)), res.Elapsed.Round(time.Millisecond))
	rep := tiersReport(res)
	if err := tiersFigure(res, env, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

func tiersReport(res *tiersim.Result) *bench.Report {
	t := res.Options.OverloadThreshold
	rep := &bench.Report{
		Intro: fmt.Sprintf(`The fleet simulator (internal/lab/bench/topologybench/tiersim): %s fleets sampled with seed
%d from %d-%d clusters in %d-%d regions, 1-%d Nodes per cluster of one size (%v cores), ready
endpoints per cluster log-uniform in 1-%d independently of CPU (half the clusters have at most 8),
and a %.0f%% chance per cluster that none is ready. Every cluster's tiers are its own cluster, then
its region (KEP-5939's first story without the continent). A cluster sends traffic in proportion
to its CPU; in-cluster and in-region are the shares of all traffic served in the client's own
cluster and region; load is one endpoint's expected load over its fair share. "fleetslice"
follows locality.AllocateTiers at threshold %.2f, "KEP default" locality.FirstReady.`,
			bench.Count(int64(res.Cases)), res.Seed, tiersim.MinClusters, tiersim.MaxClusters, tiersim.MinRegions,
			tiersim.MaxRegions, tiersim.MaxNodes, tiersim.NodeCores, tiersim.MaxEndpoints, 100*tiersim.FailedChance, t),
	}
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	table := bench.Table{
		Caption: fmt.Sprintf("Means over the %s feasible fleets (%s without any ready endpoint are left out)",
			bench.Count(int64(res.Feasible)), bench.Count(int64(res.Infeasible))),
		Header: []string{"Policy", "In-cluster", "In-region", "Mean worst endpoint load", "Worst endpoint load",
			fmt.Sprintf("Fleets over +%.0f%%", 100*t)},
	}
	for _, st := range res.Stats {
		table.Rows = append(table.Rows, []string{st.Policy, pct(res.Mean(st.InCluster)), pct(res.Mean(st.InRegion)),
			pct(res.Mean(st.MaxLoad)), pct(st.MaxLoad.Max), bench.Count(int64(st.OverBound))})
	}
	kep, ours := res.Stat(tiersim.KEPDefault), res.Stat(tiersim.Fleetslice)
	gap := bench.Table{
		Caption: "What the bound costs in region against the KEP default",
		Header:  []string{"KEP default in-region", "fleetslice in-region", "Difference", "Region bound's cost (closed form)", "Largest"},
		Rows: [][]string{{pct(res.Mean(kep.InRegion)), pct(res.Mean(ours.InRegion)),
			pct(res.Mean(kep.InRegion) - res.Mean(ours.InRegion)), pct(res.Mean(res.RegionCost)), pct(res.RegionCost.Max)}},
	}
	rep.Tables = append(rep.Tables, table, gap)
	rep.Checks = tiersChecks(res)
	rep.Notes = []string{fmt.Sprintf(`The region bound's cost of a fleet is the traffic the KEP default keeps in regions whose ready
endpoints cannot carry it within +%.0f%% of their fair share; fleetslice gives up exactly that in
region and no more, and keeps at least as much in region as fleetslice without tiers in every fleet.`, 100*t)}
	if ex := res.Example; ex != nil {
		rep.Notes = append(rep.Notes, "The picture's fleet: "+ex.Case.Describe()+" (cores/ready endpoints per cluster).")
	}
	return rep
}

func tiersChecks(res *tiersim.Result) []bench.Check {
	t := res.Options.OverloadThreshold
	ours, kep := res.Stat(tiersim.Fleetslice), res.Stat(tiersim.KEPDefault)
	over := bench.Check{Name: fmt.Sprintf("fleetslice: no fleet puts an endpoint over +%.0f%%, where the KEP default does in many", 100*t)}
	if ours.OverBound > 0 || kep.OverBound == 0 {
		over.Failure = fmt.Sprintf("fleetslice over in %d fleets, the KEP default in %d", ours.OverBound, kep.OverBound)
	}
	region := bench.Check{Name: "fleetslice keeps as much in cluster as without tiers, and at least as much in region, in every fleet"}
	if res.InClusterDiffers > 0 || res.BelowFlat > 0 {
		region.Failure = fmt.Sprintf("%d fleets differ in cluster, %d keep less in region", res.InClusterDiffers, res.BelowFlat)
	}
	cost := bench.Check{Name: "fleetslice keeps less in region than the KEP default by exactly the region bound's cost, in every fleet"}
	if res.GapNotCost > 0 {
		cost.Failure = fmt.Sprintf("%d fleets where the gap is not the bound's cost", res.GapNotCost)
	}
	return []bench.Check{over, region, cost}
}

// tiersFigure draws the example fleet: each cluster's endpoint load under each policy, the
// clusters ordered by region, beside the bound.
func tiersFigure(res *tiersim.Result, env bench.Env, rep *bench.Report) error {
	ex := res.Example
	path, link, ok := env.Figure("locality-tiers-case.svg")
	if ex == nil || !ok {
		return nil
	}
	var order []int // the clusters with ready endpoints, by region
	for i, cl := range ex.Case.Clusters {
		if cl.Endpoints > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return ex.Case.Region[a] - ex.Case.Region[b] })
	var lines []bench.Line
	for _, p := range []string{tiersim.Fleetslice, tiersim.KEPDefault, tiersim.Spread} {
		line := bench.Line{Name: p}
		o := ex.Outcomes[slices.Index(tiersim.Policies, p)]
		for x, i := range order {
			line.Points = append(line.Points, bench.Point{X: float64(x + 1), Y: 100 * o.Loads[i]})
		}
		lines = append(lines, line)
	}
	bound := bench.Line{Name: fmt.Sprintf("bound (+%.0f%%)", 100*res.Options.OverloadThreshold)}
	for _, x := range []float64{1, float64(len(order))} {
		bound.Points = append(bound.Points, bench.Point{X: x, Y: 100 * (1 + res.Options.OverloadThreshold)})
	}
	lines = append(lines, bound)
	title := fmt.Sprintf("One fleet: %d clusters in %d regions", len(order), ex.Case.Regions)
	if err := bench.WriteLineChart(path, title, "cluster with ready endpoints, ordered by region", "endpoint load, % of fair share", lines); err != nil {
		return fmt.Errorf("drawing %s: %w", path, err)
	}
	rep.Figures = append(rep.Figures, bench.Figure{Path: path, Link: link,
		Caption: "each cluster's expected endpoint load in one sampled fleet, by policy"})
	return nil
}
