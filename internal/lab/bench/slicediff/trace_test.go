package slicediff

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

// TestReplayTraces replays the traces named by FLEETSLICE_SLICEDIFF_TRACES (a glob of files the
// endpointslice-e2e bench wrote with FLEETSLICE_E2E_TRACE_DIR) through both controllers and logs
// their syncs and writes: a tool for tuning, skipped without traces.
func TestReplayTraces(t *testing.T) {
	glob := os.Getenv("FLEETSLICE_SLICEDIFF_TRACES")
	if glob == "" {
		t.Skip("FLEETSLICE_SLICEDIFF_TRACES not set")
	}
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces match %q: %v", glob, err)
	}
	// A sync's cost on the bench's control plane: fleetslice's measured worker time per sync is
	// about base + per write (the setting without the cluster's limits), upstream's that of
	// kube-controller-manager in the same setting.
	ours := func(writes int64) time.Duration {
		return envMS("FLEETSLICE_TRACE_OURS_BASE", 130) + time.Duration(writes)*envMS("FLEETSLICE_TRACE_OURS_WRITE", 55)
	}
	theirs := func(writes int64) time.Duration {
		return envMS("FLEETSLICE_TRACE_THEIRS_BASE", 100) + time.Duration(writes)*envMS("FLEETSLICE_TRACE_THEIRS_WRITE", 185)
	}
	defaults := coalescing
	t.Cleanup(func() { coalescing = defaults })
	coalescing.MaxDelay = envMS("FLEETSLICE_TRACE_MAX_DELAY", int(coalescing.MaxDelay.Milliseconds()))
	coalescing.Window = envMS("FLEETSLICE_TRACE_WINDOW", int(coalescing.Window.Milliseconds()))
	coalescing.Quiet = envMS("FLEETSLICE_TRACE_QUIET", int(coalescing.Quiet.Milliseconds()))
	// Each trace alone, or (FLEETSLICE_SLICEDIFF_CHAIN set) all of them, in name order, as the
	// phases of one run: creation and rollouts recorded one after the other on one cluster,
	// so that each starts from the layout the one before left.
	runs := [][]string{}
	if os.Getenv("FLEETSLICE_SLICEDIFF_CHAIN") != "" {
		runs = append(runs, files)
	} else {
		for _, f := range files {
			runs = append(runs, []string{f})
		}
	}
	for _, run := range runs {
		var phases [][]e2ebench.PodEvent
		for _, f := range run {
			r, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			events, err := ReadTrace(r)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			phases = append(phases, events)
		}
		name := filepath.Base(run[0])
		if len(run) > 1 {
			name = fmt.Sprintf("%s and %d more", name, len(run)-1)
		}
		for _, side := range []struct {
			name string
			cost func(int64) time.Duration
		}{{Upstream, theirs}, {Fleetslice, ours}} {
			res, err := RunScenario(context.Background(), TraceScenario(name, phases, side.cost), tinySize(), side.name)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %-10s events %5d syncs %4d writes %4d (c%d u%d d%d) final slices %d delay p50 %v p99 %v failures %v",
				name, side.name, res.Events, res.Syncs, res.Writes.Total(), res.Writes.Creates, res.Writes.Updates,
				res.Writes.Deletes, res.FinalSlices, bench.Quantile(res.Delays, 0.5).Round(time.Millisecond),
				bench.Quantile(res.Delays, 0.99).Round(time.Millisecond), res.Failures)
		}
	}
}

func envMS(name string, def int) time.Duration {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		def = n
	}
	return time.Duration(def) * time.Millisecond
}
