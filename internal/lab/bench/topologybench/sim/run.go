package sim

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Config is one static run.
type Config struct {
	Settings
	// Sample limits the run to this many cases spread evenly over the space (0: all).
	Sample int
	// Workers is the number of goroutines (0: GOMAXPROCS).
	Workers int
	// Progress, when set, is called after each finished section with cases done and total.
	Progress func(done, total int)
}

// Run scores one algorithm over the published space (or a sample of it). Sections are handed
// to workers and merged in the published order, so the result does not depend on scheduling.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	alg, err := NewAlgorithm(cfg.Settings)
	if err != nil {
		return Stats{}, err
	}
	newAlgorithm := func() Algorithm {
		alg, _ := NewAlgorithm(cfg.Settings)
		return alg
	}
	defer roomyGC()()
	return runShared(ctx, cfg, newAlgorithm, isProportional(alg))
}

// simGCPercent is the garbage collector's target while a run lasts. Upstream's topologycache
// allocates hint objects by the hundred per case over a live heap of a few MB, so the default
// target (100) collects many times a second; a larger one spends about a fifth less time over
// the whole space for some tens of MB more heap.
const simGCPercent = 800

// roomyGC raises the GC target for a run unless GOGC was set, and returns what restores it.
func roomyGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	previous := debug.SetGCPercent(simGCPercent)
	return func() { debug.SetGCPercent(previous) }
}

// runShared is Run with the algorithm, and whether sections share plans, chosen by the caller.
func runShared(ctx context.Context, cfg Config, newAlgorithm func() Algorithm, share bool) (Stats, error) {
	start := time.Now()
	secs := sections()
	offsets := make([]int, len(secs))
	total := 0
	for i, s := range secs {
		offsets[i] = total
		total += s.size()
	}
	pick := sampler{n: cfg.Sample, total: total}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	results := make([]Stats, len(secs))
	var mu sync.Mutex
	done := 0
	type worker struct {
		alg  Algorithm
		plan *Plan
		memo *planMemo
	}
	newWorker := func() worker {
		return worker{alg: newAlgorithm(), plan: &Plan{}, memo: &planMemo{}}
	}
	groups := byCostFirst(secs, shareGroups(secs, share))
	err := parallelFor(ctx, len(groups), workers, newWorker, func(w worker, g int) {
		memo := w.memo.reset(len(groups[g]) > 1, secs[groups[g][0]].size())
		for _, i := range groups[g] {
			st := Stats{Threshold: thresholdOf(cfg.Settings)}
			secs[i].forEach(func(j int, c Case) {
				if !pick.picks(offsets[i] + j) {
					return
				}
				if plan, hinted := memo.plan(w.alg, j, c, w.plan); hinted {
					st.Add(Evaluate(c, plan))
				} else {
					st.Add(Evaluate(c, nil))
				}
			})
			results[i] = st
			if cfg.Progress != nil {
				mu.Lock()
				done += secs[i].size()
				cfg.Progress(done, total)
				mu.Unlock()
			}
		}
	})
	out := Stats{Algorithm: cfg.Algorithm, Threshold: thresholdOf(cfg.Settings)}
	for i := range results {
		out.Merge(results[i])
	}
	out.Elapsed = time.Since(start)
	return out, err
}

func thresholdOf(s Settings) float64 {
	switch s.Algorithm {
	case Fleetslice:
		return s.Threshold
	case Upstream:
		return UpstreamThreshold
	}
	return 0
}
