// Package topologybench is the `topology` part of `fleetslice bench`: the published topology
// simulator's 3-zone space scored for no hints ("original"), upstream's topologycache and
// fleetslice's allocator, through internal/lab/bench/topologybench/sim, with the trade-off picture.
package topologybench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench/sim"
)

// QuickSample is how many evenly spread cases --quick scores per algorithm.
const QuickSample = 20_000

// DefaultThresholds are fleetslice's runs: its default overload threshold and upstream's, so
// each can be read against upstream at the same bound.
var DefaultThresholds = []float64{0.20, 0.25}

// published are the means the talk published over the whole space, for reading ours against.
var published = [][]string{
	{"original (published)", "72.48", "38.84", "", ""},
	{"KEP's chosen algorithm (published)", "86.71", "84.33", "63.10", "49.33%"},
}

type partOptions struct {
	sample     int
	thresholds []float64
	workers    int
}

// Part is the `topology` benchmark.
func Part() bench.Part {
	// Defaults live here, not only in the flags, so a Part run without a command line (the quick
	// test) gets them too.
	o := &partOptions{sample: -1, thresholds: DefaultThresholds}
	return bench.Part{
		Name:  "topology",
		Title: "Topology hints: the published simulator space, original, upstream and fleetslice",
		Flags: func(fs *pflag.FlagSet) {
			fs.IntVar(&o.sample, "topology-sample", o.sample,
				fmt.Sprintf("topology part: score N evenly spread cases per algorithm (0: all %s; default: all, or %s with --quick)",
					bench.Count(int64(sim.CaseCount())), bench.Count(QuickSample)))
			fs.Float64SliceVar(&o.thresholds, "topology-thresholds", o.thresholds,
				"topology part: fleetslice overload thresholds to score, one run each")
			fs.IntVar(&o.workers, "topology-workers", o.workers, "topology part: simulator goroutines (0: GOMAXPROCS)")
		},
		Run: o.run,
	}
}

func (o *partOptions) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	sample := o.sample
	if sample < 0 {
		sample = 0
		if env.Quick {
			sample = QuickSample
		}
	}
	thresholds := o.thresholds
	if thresholds == nil {
		thresholds = DefaultThresholds
	}
	for _, t := range thresholds {
		if math.IsNaN(t) || t < 0 || t > 10 {
			return nil, fmt.Errorf("topology threshold %v must be within 0..10", t)
		}
	}
	runs := []sim.Settings{{Algorithm: sim.Original}, {Algorithm: sim.Upstream}}
	for _, t := range thresholds {
		runs = append(runs, sim.Settings{Algorithm: sim.Fleetslice, Threshold: t})
	}
	var results []sim.Stats
	for _, s := range runs {
		cfg := sim.Config{Settings: s, Sample: sample, Workers: o.workers}
		if sample == 0 {
			cfg.Progress = progress(env, label(s))
		}
		st, err := sim.Run(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("scoring %s: %w", label(s), err)
		}
		env.Logf("topology %-16s mean total %.2f in-zone %.2f (%s)", label(s), st.Mean(st.Total), st.Mean(st.InZone),
			st.Elapsed.Round(time.Second))
		results = append(results, st)
	}
	return report(results, sample, env)
}

func label(s sim.Settings) string {
	if s.Algorithm == sim.Fleetslice {
		return fmt.Sprintf("fleetslice@%.2f", s.Threshold)
	}
	return s.Algorithm
}

// progress logs every tenth of a run, which on the full space takes minutes.
func progress(env bench.Env, name string) func(done, total int) {
	last := 0
	return func(done, total int) {
		if tenth := 10 * done / total; tenth > last {
			last = tenth
			env.Logf("topology %-16s %3d%%", name, 10*tenth)
		}
	}
}

func report(results []sim.Stats, sample int, env bench.Env) (*bench.Report, error) {
	space := fmt.Sprintf("the whole space of %s cases", bench.Count(int64(sim.CaseCount())))
	if sample > 0 {
		space = fmt.Sprintf("%s cases spread evenly over the %s-case space", bench.Count(int64(sample)), bench.Count(int64(sim.CaseCount())))
	}
	rep := &bench.Report{
		Intro: fmt.Sprintf(`The topology-aware routing talk's evaluation (googleinterns/k8s-topology-simulator),
re-implemented in internal/lab/bench/topologybench/sim and run here over %s: three zones, each sending
traffic in proportion to its Nodes; in-zone is the share of traffic kept in its zone, deviation
scores how far endpoint loads stray from an even share, slice scores EndpointSlices used; total =
0.45 in-zone + 0.40 deviation + 0.15 slice. "Slice" counts the slices the controllers really
write (ceil(endpoints/100), hints live inside them); the published simulator grouped endpoints
into per-zone slices, so its totals compare with the "per-zone slices" columns. "Upstream" is k8s.io/endpointslice's topologycache
used as a library, with its own 0.2 threshold; "fleetslice" is this project's allocator at the
threshold shown.`, space),
	}
	table := bench.Table{
		Caption: "Means over valid cases (scores out of 100)",
		Header: []string{"Algorithm", "Threshold", "Valid cases", "Hinted cases", "Total", "In-zone", "Deviation", "Slice",
			"Total, per-zone slices", "Slice, per-zone slices", "Max deviation seen", "Cases over threshold", "Max overload seen", "Time"},
	}
	f := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for i := range results {
		st := &results[i]
		threshold := "none"
		if st.Algorithm != sim.Original {
			threshold = f(st.Threshold)
		}
		over := "n/a"
		if st.Algorithm != sim.Original {
			over = bench.Count(int64(st.OverThreshold))
		}
		table.Rows = append(table.Rows, []string{
			st.Algorithm, threshold, bench.Count(int64(st.Valid)), bench.Count(int64(st.Hinted)),
			f(st.Mean(st.Total)), f(st.Mean(st.InZone)), f(st.Mean(st.Deviation)), f(st.Mean(st.Slice)),
			f(st.Mean(st.GroupedTotal)), f(st.Mean(st.GroupedSlice)),
			f(st.MaxDeviationPct.Max) + "%", over, f(st.MaxOverloadPct.Max) + "%", st.Elapsed.Round(time.Second).String(),
		})
	}
	rep.Tables = append(rep.Tables, table, bench.Table{
		Caption: "Published means over the whole space, for reference",
		Header:  []string{"Algorithm", "Total", "In-zone", "Slice", "Max deviation seen"},
		Rows:    published,
	})
	rep.Checks = checks(results, sample)
	if path, link, ok := env.Figure("topology-tradeoff.svg"); ok {
		points := make([]sim.PlotPoint, len(results))
		for i := range results {
			points[i] = sim.PointOf(&results[i])
		}
		if err := sim.WritePlot(path, points); err != nil {
			return nil, fmt.Errorf("drawing %s: %w", path, err)
		}
		rep.Figures = append(rep.Figures, bench.Figure{Path: path, Link: link,
			Caption: "mean in-zone score against mean deviation score; fleetslice labelled by threshold"})
	}
	rep.Notes = []string{`Time is wall-clock time of each run with the simulator's workers on the shared machine. Cases
over threshold counts valid cases in which some endpoint expects more than (1 + threshold) times
its fair share of traffic; upstream is counted against its own 0.2.`}
	return rep, nil
}

func checks(results []sim.Stats, sample int) []bench.Check {
	var out []bench.Check
	cases := results[0].Valid + results[0].Invalid
	same := bench.Check{Name: "every algorithm scored the same cases"}
	for _, st := range results {
		if st.Valid+st.Invalid != cases {
			same.Failure = fmt.Sprintf("%s scored %d cases, %s %d", st.Algorithm, st.Valid+st.Invalid, results[0].Algorithm, cases)
		}
	}
	out = append(out, same)
	for _, st := range results {
		if st.Algorithm != sim.Fleetslice {
			continue
		}
		c := bench.Check{Name: fmt.Sprintf("fleetslice@%.2f: no case puts an endpoint over its threshold", st.Threshold)}
		if st.OverThreshold > 0 {
			c.Failure = fmt.Sprintf("%d cases over, worst %.2f%%", st.OverThreshold, st.MaxOverloadPct.Max)
		}
		out = append(out, c)
	}
	if sample == 0 {
		// On the whole space the original row must match the published one: that checks the scorer.
		i := slices.IndexFunc(results, func(s sim.Stats) bool { return s.Algorithm == sim.Original })
		if i >= 0 {
			st := &results[i]
			c := bench.Check{Name: "original reproduces the published 72.48 total and 38.84 in-zone"}
			if got := fmt.Sprintf("%.2f/%.2f", st.Mean(st.Total), st.Mean(st.InZone)); got != "72.48/38.84" {
				c.Failure = "got " + got
			}
			out = append(out, c)
		}
	}
	return out
}
