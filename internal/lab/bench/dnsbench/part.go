// Package dnsbench is the `dns` part of `fleetslice bench`: fleetslice-dns answering
// clusterset.local names with the clusterset plugin beside the same binary answering cluster.local
// names with CoreDNS's kubernetes plugin, for the same number of Services, under the same load,
// and how soon a new ServiceImport's name resolves.
package dnsbench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// Sizes are the imported Services measured, QuickSizes those of --quick.
var (
	Sizes      = []int{1_000, 10_000}
	QuickSizes = []int{50, 200}
)

// MaxServices bounds --dns-sizes: every Service takes a ClusterIP of the API server's /16.
const MaxServices = 50_000

type settings struct {
	sizes    []int
	workers  int
	duration time.Duration
	rounds   int
	samples  int
	seed     uint64
}

func (o *settings) resolve(quick bool) (settings, error) {
	s := settings{sizes: Sizes, workers: o.workers, duration: 5 * time.Second, rounds: 2, samples: 20, seed: o.seed}
	if quick {
		s.sizes, s.duration, s.rounds, s.samples = QuickSizes, 500*time.Millisecond, 1, 5
	}
	if len(o.sizes) > 0 {
		s.sizes = o.sizes
	}
	if o.duration > 0 {
		s.duration = o.duration
	}
	if o.rounds > 0 {
		s.rounds = o.rounds
	}
	if o.samples > 0 {
		s.samples = o.samples
	}
	for _, n := range s.sizes {
		if n < 1 || n > MaxServices {
			return s, fmt.Errorf("dns size %d must be within 1..%d", n, MaxServices)
		}
	}
	if s.workers < 1 || s.workers > 256 {
		return s, fmt.Errorf("dns workers %d must be within 1..256", s.workers)
	}
	if s.duration > time.Minute || s.samples > 1000 || s.rounds > 10 {
		return s, fmt.Errorf("dns load of %s x %d rounds and %d samples: at most 1m, 10 rounds and 1000 samples", s.duration, s.rounds, s.samples)
	}
	return s, nil
}

// Part is the `dns` benchmark.
func Part() bench.Part {
	o := &settings{workers: 8, seed: 1}
	return bench.Part{
		Name:  "dns",
		Title: "DNS: fleetslice-dns's clusterset.local beside CoreDNS's kubernetes plugin",
		Flags: func(fs *pflag.FlagSet) {
			fs.IntSliceVar(&o.sizes, "dns-sizes", nil, fmt.Sprintf("dns part: imported Services (and as many Services) to measure at (default %v, %v with --quick)", Sizes, QuickSizes))
			fs.IntVar(&o.workers, "dns-workers", o.workers, "dns part: concurrent clients, each waiting for its answer before it asks again")
			fs.DurationVar(&o.duration, "dns-duration", 0, "dns part: how long each zone is loaded per round (default 5s, 500ms with --quick)")
			fs.IntVar(&o.rounds, "dns-rounds", 0, "dns part: rounds per size, the zones' order alternating (default 2, 1 with --quick)")
			fs.IntVar(&o.samples, "dns-samples", 0, "dns part: new Services and ServiceImports timed until they resolve, per size (default 20, 5 with --quick)")
		},
		Run: o.run,
	}
}

// zoneRun is one zone's load at one size, all rounds together.
type zoneRun struct {
	zone   string
	result LoadResult
}

// sizeRun is everything measured at one size.
type sizeRun struct {
	services            int
	zones               []zoneRun
	clusterset, cluster *propagation
}

func (o *settings) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	s, err := o.resolve(env.Quick)
	if err != nil {
		return nil, err
	}
	binary, err := env.Binary("fleetslice-dns")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleetslice-bench-dns-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	api, err := testenv.Start("bench-dns")
	if err != nil {
		return nil, err
	}
	defer func() { _ = api.Stop() }()
	w, err := newWorld(ctx, api.Client)
	if err != nil {
		return nil, err
	}
	// One Service and import before the server starts, so its start can be told apart from a
	// zone that is slow to sync.
	if err := w.grow(ctx, 1); err != nil {
		return nil, err
	}
	probe := map[string]string{w.cluster.list[0]: w.cluster.want[w.cluster.list[0]], w.clusterset.list[0]: w.clusterset.want[w.clusterset.list[0]]}
	srv, err := startServer(ctx, binary, dir, api.Config, probe)
	if err != nil {
		return nil, err
	}
	defer func() { _ = srv.stop() }()

	var runs []sizeRun
	for _, n := range s.sizes {
		start := time.Now()
		if err := w.grow(ctx, n); err != nil {
			return nil, err
		}
		env.Logf("dns: %d Services and ServiceImports written in %s", n, time.Since(start).Round(100*time.Millisecond))
		// The last ones written must be served before the load starts.
		last := w.clusterset.list[len(w.clusterset.list)-1]
		if _, err := srv.waitFor(ctx, last, w.clusterset.want[last], time.Minute); err != nil {
			return nil, err
		}
		last = w.cluster.list[len(w.cluster.list)-1]
		if _, err := srv.waitFor(ctx, last, w.cluster.want[last], time.Minute); err != nil {
			return nil, err
		}
		run := sizeRun{services: n, zones: []zoneRun{{zone: "clusterset.local"}, {zone: "cluster.local"}}}
		for round := range s.rounds {
			order := []int{0, 1}
			if round%2 == 1 {
				order = []int{1, 0}
			}
			for _, z := range order {
				zn := &w.clusterset
				if z == 1 {
					zn = &w.cluster
				}
				res, err := Load{Address: srv.addr, Names: zn.list[:n], Want: zn.want, Workers: s.workers,
					Duration: s.duration, MaxQueries: maxQueries, Timeout: time.Second, Seed: s.seed + uint64(round)}.Run(ctx)
				if err != nil {
					return nil, err
				}
				// Rounds of a zone run one after another: their times add up.
				run.zones[z].result.add(res)
				run.zones[z].result.Elapsed += res.Elapsed
				env.Logf("dns: %d Services, %s, round %d: %.0f queries/s", n, run.zones[z].zone, round+1, res.QPS())
			}
		}
		run.clusterset, run.cluster, err = w.propagate(ctx, srv, s.samples)
		if err != nil {
			return nil, err
		}
		runs = append(runs, run)
	}
	return report(s, runs), nil
}

// maxQueries bounds one load phase whatever its duration: a few times what one phase reaches on
// two cores.
const maxQueries = 5_000_000
