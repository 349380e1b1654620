package agent

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"testing"

	"github.com/go-logr/logr"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

func gcPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// gcDataplane records the collector's GOGC while each sync runs.
type gcDataplane struct{ seen []int64 }

func (d *gcDataplane) Sync(_ context.Context, services []dataplane.Service, full bool) (dataplane.Stats, error) {
	d.seen = append(d.seen, gcPercent())
	return dataplane.Stats{Full: full, Services: len(services)}, nil
}

// Full syncs run with the collector at FullSyncGCPercent and put the process's own GOGC back
// afterwards; incremental syncs, a GOGC already lower, and 0 leave it alone.
func TestFullSyncsLowerTheCollectorGoal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	dp := &gcDataplane{}
	opts := DefaultOptions()
	opts.Dataplanes = []Dataplane{dp}
	a := &Agent{opts: opts, store: scaleStore(5, 2), log: logr.Discard()}
	a.sync(context.Background(), true)
	a.sync(context.Background(), false)
	debug.SetGCPercent(10)
	a.sync(context.Background(), true)
	debug.SetGCPercent(100)
	a.opts.FullSyncGCPercent = 0
	a.sync(context.Background(), true)
	if want := []int64{DefaultFullSyncGCPercent, 100, 10, 100}; !slices.Equal(dp.seen, want) {
		t.Errorf("GOGC during the syncs %v, want %v", dp.seen, want)
	}
	if got := gcPercent(); got != 100 {
		t.Errorf("GOGC after the syncs %d, want the process's own 100", got)
	}
}
