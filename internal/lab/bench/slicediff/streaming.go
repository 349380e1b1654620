package slicediff

import (
	"time"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/coalesce"
)

// streaming syncs as the controllers do at their default batch period of 0, with syncs as fast
// as the events come rather than one per equal batch: upstream syncs after every change (its
// worker picks each event up at once); fleetslice asks its coalescing when to sync, in the
// scenario's time, through the same decision its reconciler makes.
//
// A sync may take scenario time (cost): a loaded control plane, whose round trips are slow.
// While it runs, the Service is not synced again, as a workqueue never hands one key to two
// workers: upstream syncs again as soon as it ends if changes came meanwhile (so its slowness
// batches for it, as kube-controller-manager's on a busy machine), and fleetslice is told how
// long the sync took, as its reconciler tells its coalescing.
type streaming struct {
	on bool
	// coalescer is fleetslice's; nil syncs after every change.
	coalescer *coalesce.Coalescer
	// cost is how long a sync that wrote so many times takes; nil takes no time.
	cost func(writes int64) time.Duration
	// syncAt is when the next sync is due; zero when none is. busyUntil is when the running
	// sync ends.
	syncAt, busyUntil time.Time
	// waiting are the times of the changes no sync has taken in yet; taken those of the sync
	// running.
	waiting, taken []time.Time
	// delays run from each change to the end of the sync that took it in.
	delays      []time.Duration
	longestSync time.Duration
}

// coalescing is fleetslice's coalescing in the streaming scenarios: its defaults.
var coalescing = endpointslice.DefaultOptions().CoalesceConfig()

// startStreaming ends a scenario's setup like startMeasuring, then syncs as the events come,
// each sync taking cost (nil: no time).
func (w *world) startStreaming(cost func(writes int64) time.Duration) {
	w.startMeasuring(0)
	w.streaming = streaming{on: true, cost: cost}
	if _, ok := w.controller.(*fleetsliceController); ok {
		w.streaming.coalescer = coalesce.New(coalescing)
	}
}

func (s *streaming) changed(w *world) {
	s.waiting = append(s.waiting, w.clock)
	at := w.clock
	if s.coalescer != nil {
		at = at.Add(s.coalescer.Changed(serviceKey, w.clock))
	}
	if at.Before(s.busyUntil) {
		at = s.busyUntil
	}
	if s.syncAt.IsZero() || at.Before(s.syncAt) {
		s.syncAt = at
	}
	s.runDue(w, w.clock)
}

// runDue runs every sync due by to, each at its own time; a sync its coalescing still holds
// moves to when the hold ends.
func (s *streaming) runDue(w *world, to time.Time) {
	for s.on && !s.syncAt.IsZero() && !s.syncAt.After(to) {
		at := s.syncAt
		if s.coalescer != nil {
			if hold := s.coalescer.Hold(serviceKey, at); hold > 0 {
				s.syncAt = at.Add(hold)
				continue
			}
		}
		s.syncAt = time.Time{}
		w.moveClock(at)
		before := w.store.writes.Total()
		w.sync()
		var took time.Duration
		if s.cost != nil {
			took = s.cost(w.store.writes.Total() - before)
		}
		s.busyUntil = at.Add(took)
		s.longestSync = max(s.longestSync, took)
		for _, t := range s.taken {
			s.delays = append(s.delays, s.busyUntil.Sub(t))
		}
		s.taken = s.taken[:0]
		if s.coalescer != nil {
			s.coalescer.Synced(serviceKey, took)
		}
	}
}

// synced hands the waiting changes to the sync starting now.
func (s *streaming) synced() {
	if !s.on {
		return
	}
	s.taken = append(s.taken, s.waiting...)
	s.waiting = s.waiting[:0]
}
