package topologybench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench/clustersim"
)

// Case counts of the locality part: the whole run, and --quick.
const (
	LocalityCases      = 1_000_000
	LocalityQuickCases = 50_000
)

type localityOptions struct {
	cases     int
	threshold float64
	seed      uint64
}

// LocalityPart is the `locality` benchmark: the topology simulator with clusters, scoring
// spread, local-first, locality failover and fleetslice's capacity-aware allocation.
func LocalityPart() bench.Part {
	o := &localityOptions{threshold: locality.DefaultOptions().OverloadThreshold, seed: clustersim.DefaultSeed}
	return bench.Part{
		Name:  "locality",
		Title: "Locality across clusters: spread, local-first, failover and fleetslice on clusters x zones",
		Flags: func(fs *pflag.FlagSet) {
			fs.IntVar(&o.cases, "locality-cases", 0, fmt.Sprintf("locality part: cases to sample (default %s, %s with --quick)",
				bench.Count(LocalityCases), bench.Count(LocalityQuickCases)))
			fs.Float64Var(&o.threshold, "locality-threshold", o.threshold, "locality part: fleetslice's overload threshold")
			fs.Uint64Var(&o.seed, "locality-seed", o.seed, "locality part: seed of the sampled cases")
		},
		Run: o.run,
	}
}

func (o *localityOptions) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	cases := o.cases
	if cases <= 0 {
		cases = LocalityCases
		if env.Quick {
			cases = LocalityQuickCases
		}
	}
	if math.IsNaN(o.threshold) || o.threshold < 0 || o.threshold > 10 {
		return nil, fmt.Errorf("locality threshold %v must be within 0..10", o.threshold)
	}
	opts := locality.Options{OverloadThreshold: o.threshold, ReturnThreshold: o.threshold / 2}
	res, err := clustersim.Run(ctx, clustersim.Config{Cases: cases, Seed: o.seed, Options: opts})
	if err != nil {
		return nil, err
	}
	env.Logf("locality: %s cases in %s", bench.Count(int64(cases)), res.Elapsed.Round(time.Millisecond))
	rep := localityReport(res)
	if err := localityFigures(res, env, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

func localityReport(res *clustersim.Result) *bench.Report {
	t := res.Options.OverloadThreshold
	rep := &bench.Report{
		Intro: fmt.Sprintf(`The topology simulator with clusters (internal/lab/bench/topologybench/clustersim): %s
ClusterSets sampled with seed %d from %d-%d clusters, 1-%d zones per cluster, 0-%d Nodes per zone
of one size per cluster (%v cores), 0-%d ready endpoints per zone, and a %.0f%% chance per cluster
that all of its endpoints are not ready. A zone sends traffic in proportion to its CPU; in-cluster
and in-zone are the shares of all traffic served in the client's own cluster and zone; overload
is the largest expected load of one endpoint over its fair share. "fleetslice" follows
controllers/multicluster/locality's allocation at threshold %.2f.`,
			bench.Count(int64(res.Cases)), res.Seed, clustersim.MinClusters, clustersim.MaxClusters, clustersim.MaxZones,
			clustersim.MaxNodes, clustersim.NodeCores, clustersim.MaxEndpoints, 100*clustersim.FailedChance, t),
	}
	pct := func(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }
	table := bench.Table{
		Caption: fmt.Sprintf("Means over the %s feasible cases (%s without any ready endpoint are left out)",
			bench.Count(int64(res.Feasible)), bench.Count(int64(res.Infeasible))),
		Header: []string{"Policy", "In-cluster", "In-zone", "Mean max overload", "Worst max overload",
			fmt.Sprintf("Cases over +%.0f%%", 100*t)},
	}
	for _, st := range res.Stats {
		table.Rows = append(table.Rows, []string{st.Policy, pct(res.Mean(st.InCluster)), pct(res.Mean(st.InZone)),
			pct(res.Mean(st.MaxOverload)), pct(st.MaxOverload.Max), bench.Count(int64(st.OverBound))})
	}
	local, ours := res.Stats[1], res.Stats[3]
	gap := bench.Table{
		Caption: "What the bound costs against local-first",
		Header:  []string{"Local-first in-cluster", "fleetslice in-cluster", "Difference", "Bound's cost (closed form)", "Largest bound's cost"},
		Rows: [][]string{{pct(res.Mean(local.InCluster)), pct(res.Mean(ours.InCluster)),
			pct(res.Mean(local.InCluster) - res.Mean(ours.InCluster)), pct(res.Mean(res.BoundCost)), pct(res.BoundCost.Max)}},
	}
	rep.Tables = append(rep.Tables, table, gap)
	rep.Checks = localityChecks(res)
	rep.Notes = []string{
		fmt.Sprintf(`The bound's cost of a case is the share of traffic local-first keeps in clusters whose endpoints
cannot carry it within +%.0f%% of their fair share; fleetslice gives up exactly that and no more.
fleetslice's largest overload, %s, is in a case such as %s.`, 100*t, pct(res.WorstLoad), res.Worst.Describe()),
		`Zone names are per cluster: traffic that spills to another cluster is never counted in zone.
Failover tries the client's zone, then its cluster, then the ClusterSet, each time only when the
previous level has no ready endpoint.`,
	}
	return rep
}

func localityChecks(res *clustersim.Result) []bench.Check {
	t := res.Options.OverloadThreshold
	ours, spread, local := res.Stats[3], res.Stats[0], res.Stats[1]
	over := bench.Check{Name: fmt.Sprintf("fleetslice: no feasible case puts an endpoint over +%.0f%%", 100*t)}
	if ours.OverBound > 0 {
		over.Failure = fmt.Sprintf("%d cases over, worst %.2f%%", ours.OverBound, 100*ours.MaxOverload.Max)
	}
	above := bench.Check{Name: "fleetslice keeps more traffic in cluster than spread, and never less in any case"}
	if res.BelowSpread > 0 || res.Mean(ours.InCluster) <= res.Mean(spread.InCluster) {
		above.Failure = fmt.Sprintf("%d cases below spread; means %.4f against %.4f", res.BelowSpread,
			res.Mean(ours.InCluster), res.Mean(spread.InCluster))
	}
	cost := bench.Check{Name: "fleetslice keeps at most the bound's cost less in cluster than local-first, in every case"}
	if res.BeyondBoundCost > 0 {
		cost.Failure = fmt.Sprintf("%d cases beyond the bound's cost (local-first mean %.4f, fleetslice %.4f)",
			res.BeyondBoundCost, res.Mean(local.InCluster), res.Mean(ours.InCluster))
	}
	return []bench.Check{over, above, cost}
}

// localityFigures draws, against how lopsided a case is (local-first's largest overload), the
// in-cluster share and the largest overload of each policy.
func localityFigures(res *clustersim.Result, env bench.Env, rep *bench.Report) error {
	inCluster, overload := localityLines(res)
	for _, fig := range []struct {
		file, title, y, caption string
		lines                   []bench.Line
	}{
		{"locality-in-cluster.svg", "Traffic kept in the client's cluster", "in-cluster traffic, %", "mean in-cluster share per bin of local-first's largest overload", inCluster},
		{"locality-overload.svg", "Largest expected overload of one endpoint", "max overload, % over fair share", "mean largest overload per bin of local-first's largest overload", overload},
	} {
		path, link, ok := env.Figure(fig.file)
		if !ok {
			continue
		}
		if err := bench.WriteLineChart(path, fig.title, "local-first's largest overload, % (bins of 25)", fig.y, fig.lines); err != nil {
			return fmt.Errorf("drawing %s: %w", path, err)
		}
		rep.Figures = append(rep.Figures, bench.Figure{Path: path, Link: link, Caption: fig.caption})
	}
	return nil
}

func localityLines(res *clustersim.Result) (inCluster, overload []bench.Line) {
	for _, p := range []string{clustersim.Fleetslice, clustersim.Spread, clustersim.LocalFirst, clustersim.Failover} {
		in, over := bench.Line{Name: p}, bench.Line{Name: p}
		for b, bin := range res.Bins {
			if bin.Cases == 0 {
				continue
			}
			x := 100 * (float64(b) + 0.5) * clustersim.BinWidth
			in.Points = append(in.Points, bench.Point{X: x, Y: 100 * bin.InCluster[p] / float64(bin.Cases)})
			over.Points = append(over.Points, bench.Point{X: x, Y: 100 * bin.Overload[p] / float64(bin.Cases)})
		}
		inCluster, overload = append(inCluster, in), append(overload, over)
	}
	return inCluster, overload
}
