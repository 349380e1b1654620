package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/controllers/topology"
	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench/sim"
)

// simOptions are the flags of `fleetslice sim`.
type simOptions struct {
	algorithms    []string
	thresholds    []float64
	sample        int
	workers       int
	minPerZone    int
	output        string
	plot          string
	plotFrom      string
	dynamic       bool
	cases, steps  int
	seed          uint64
	quietProgress bool
}

// plotThresholds are fleetslice's points on the trade-off curve.
var plotThresholds = []float64{0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50}

func newSimCommand() *cobra.Command {
	o := simOptions{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Score topology hint algorithms on the published 3-zone input space",
		Long: `sim re-runs the evaluation of the topology-aware routing talk (googleinterns/k8s-topology-simulator):
39,273,145 three-zone cases, each zone sending traffic in proportion to its Nodes, scored for in-zone
traffic, load deviation and EndpointSlices used. It compares "original" (no hints), "upstream"
(k8s.io/endpointslice's topologycache with its own 0.2 threshold) and "fleetslice" (this project's
allocator at --threshold). The CSV has the published table's columns followed by fleetslice's own.

--dynamic instead replays seeded random endpoint and Node changes per case through fleetslice
(fed its previous hints) and upstream (kept across events as its controller keeps it).`,
		Example: `  fleetslice sim --algorithm original                       # must print 72.48 / 38.84
  fleetslice sim --algorithm all --threshold 0.25,0.2 --workers 2 --output results.csv
  fleetslice sim --sample 100000 --plot tradeoff.svg
  fleetslice sim --dynamic --threshold 0.25 --cases 2000 --steps 50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.algorithms, "algorithm", []string{sim.Fleetslice}, "algorithms to score: original, upstream, fleetslice or all")
	f.Float64SliceVar(&o.thresholds, "threshold", []float64{topology.DefaultOptions().OverloadThreshold}, "fleetslice overload thresholds, one run each")
	f.IntVar(&o.sample, "sample", 0, "score only N cases spread evenly over the space (0: all 39,273,145)")
	f.IntVar(&o.workers, "workers", 0, "worker goroutines (0: GOMAXPROCS)")
	f.IntVar(&o.minPerZone, "min-endpoints-per-zone", topology.DefaultOptions().MinEndpointsPerZone, "fleetslice's endpoints per zone before hints switch on")
	f.StringVar(&o.output, "output", "-", "CSV file to write (-: standard output)")
	f.StringVar(&o.plot, "plot", "", "also draw mean in-zone against mean deviation to this .svg/.png, running fleetslice at 0.05..0.50 and original and upstream as needed")
	f.StringVar(&o.plotFrom, "plot-from", "", "redraw --plot from a CSV written earlier instead of running anything")
	f.BoolVar(&o.dynamic, "dynamic", false, "replay random event sequences instead of scoring the static space")
	f.IntVar(&o.cases, "cases", 2000, "dynamic: start states sampled from the space")
	f.IntVar(&o.steps, "steps", 50, "dynamic: random events per case")
	f.Uint64Var(&o.seed, "seed", 1, "dynamic: random seed")
	f.BoolVar(&o.quietProgress, "quiet", false, "do not report progress on standard error")
	return cmd
}

func (o *simOptions) run(ctx context.Context, stdout, stderr io.Writer) error {
	for _, t := range o.thresholds {
		if math.IsNaN(t) || t < 0 || t > 10 {
			return fmt.Errorf("threshold %v must be between 0 and 10", t)
		}
	}
	if o.plotFrom != "" {
		return o.redraw()
	}
	out, closeOut, err := openOutput(o.output, stdout)
	if err != nil {
		return err
	}
	if o.dynamic {
		err = o.runDynamic(ctx, out, stderr)
	} else {
		err = o.runStatic(ctx, out, stderr)
	}
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	return err
}

// runs lists the static runs the flags ask for, each algorithm once and fleetslice per threshold.
func (o *simOptions) runs() ([]sim.Settings, error) {
	want := map[string]bool{}
	for _, a := range o.algorithms {
		for _, name := range strings.Split(a, ",") {
			name = strings.TrimSpace(name)
			switch name {
			case "all":
				want[sim.Original], want[sim.Upstream], want[sim.Fleetslice] = true, true, true
			case sim.Original, sim.Upstream, sim.Fleetslice:
				want[name] = true
			case "":
			default:
				return nil, fmt.Errorf("unknown algorithm %q (want original, upstream, fleetslice or all)", name)
			}
		}
	}
	thresholds := slices.Clone(o.thresholds)
	if o.plot != "" {
		want[sim.Original], want[sim.Upstream], want[sim.Fleetslice] = true, true, true
		for _, t := range plotThresholds {
			if !slices.ContainsFunc(thresholds, func(x float64) bool { return math.Abs(x-t) < 1e-9 }) {
				thresholds = append(thresholds, t)
			}
		}
	}
	var out []sim.Settings
	for _, name := range []string{sim.Original, sim.Upstream} {
		if want[name] {
			out = append(out, sim.Settings{Algorithm: name})
		}
	}
	if want[sim.Fleetslice] {
		for _, t := range thresholds {
			out = append(out, sim.Settings{Algorithm: sim.Fleetslice, Threshold: t, MinEndpointsPerZone: o.minPerZone})
		}
	}
	return out, nil
}

func (o *simOptions) runStatic(ctx context.Context, out io.Writer, stderr io.Writer) error {
	runs, err := o.runs()
	if err != nil {
		return err
	}
	var results []sim.Stats
	for _, s := range runs {
		cfg := sim.Config{Settings: s, Sample: o.sample, Workers: o.workers}
		if !o.quietProgress && isTerminal(stderr) {
			cfg.Progress = progressPrinter(stderr, label(s))
		}
		st, err := sim.Run(ctx, cfg)
		if err != nil {
			return err
		}
		if !o.quietProgress {
			fmt.Fprintf(stderr, "\r%-18s  mean total %.2f  in-zone %.2f  deviation %.2f  max overload %.2f%%  (%s)\n",
				label(s), st.Mean(st.Total), st.Mean(st.InZone), st.Mean(st.Deviation), st.MaxOverloadPct.Max,
				st.Elapsed.Round(time.Second))
		}
		results = append(results, st)
	}
	if err := sim.WriteCSV(out, results); err != nil {
		return err
	}
	if o.plot == "" {
		return nil
	}
	points := make([]sim.PlotPoint, len(results))
	for i := range results {
		points[i] = sim.PointOf(&results[i])
	}
	return sim.WritePlot(o.plot, points)
}

func (o *simOptions) runDynamic(ctx context.Context, out io.Writer, stderr io.Writer) error {
	if len(o.thresholds) != 1 {
		return fmt.Errorf("--dynamic takes exactly one --threshold")
	}
	cfg := sim.DynamicConfig{
		Threshold: o.thresholds[0], MinEndpointsPerZone: o.minPerZone,
		Cases: o.cases, Steps: o.steps, Seed: o.seed, Workers: o.workers,
	}
	results, err := sim.RunDynamic(ctx, cfg)
	if err != nil {
		return err
	}
	if !o.quietProgress {
		for _, r := range results {
			fmt.Fprintf(stderr, "%-10s %.3f hint changes per event, %.2f%% of steps over %.0f%% (%s)\n",
				r.Algorithm, float64(r.HintChanges)/float64(max(1, r.Events)),
				100*float64(r.OverSteps)/float64(max(1, r.Events)), 100*r.Threshold, r.Elapsed.Round(time.Second))
		}
	}
	return sim.WriteDynamicCSV(out, results)
}

func (o *simOptions) redraw() error {
	if o.plot == "" {
		return fmt.Errorf("--plot-from needs --plot")
	}
	f, err := os.Open(o.plotFrom)
	if err != nil {
		return err
	}
	defer f.Close()
	points, err := sim.ReadPoints(f)
	if err != nil {
		return fmt.Errorf("%s: %w", o.plotFrom, err)
	}
	return sim.WritePlot(o.plot, points)
}

func label(s sim.Settings) string {
	if s.Algorithm == sim.Fleetslice {
		return fmt.Sprintf("fleetslice@%.2f", s.Threshold)
	}
	return s.Algorithm
}

// progressPrinter reports progress on one line, at most once per percent.
func progressPrinter(w io.Writer, name string) func(done, total int) {
	last := -1
	return func(done, total int) {
		if pct := 100 * done / total; pct != last {
			last = pct
			fmt.Fprintf(w, "\r%-18s %3d%%", name, pct)
		}
	}
}

// isTerminal reports whether w is a terminal, where a self-overwriting progress line is welcome;
// in log files it would only be noise.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

func openOutput(path string, stdout io.Writer) (io.Writer, func() error, error) {
	if path == "" || path == "-" {
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}
