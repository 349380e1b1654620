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
type streaming struct {
	on bool
	// coalescer is fleetslice's; nil syncs after every change.
	coalescer *coalesce.Coalescer
	// syncAt is when the next sync is due; zero when none is.
	syncAt time.Time
	// waiting are the times of the changes no sync has taken in yet.
	waiting []time.Time
	delays  []time.Duration
}

// startStreaming ends a scenario's setup like startMeasuring, then syncs as the events come.
func (w *world) startStreaming() {
	w.startMeasuring(0)
	w.streaming = streaming{on: true}
	if _, ok := w.controller.(*fleetsliceController); ok {
		o := endpointslice.DefaultOptions()
		w.streaming.coalescer = coalesce.New(o.CoalesceQuiet, o.CoalesceBudget)
	}
}

func (s *streaming) changed(w *world) {
	s.waiting = append(s.waiting, w.clock)
	if s.coalescer == nil {
		w.sync()
		return
	}
	at := w.clock.Add(s.coalescer.Changed(serviceKey, w.clock))
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
		if hold := s.coalescer.Hold(serviceKey, at); hold > 0 {
			s.syncAt = at.Add(hold)
			continue
		}
		s.syncAt = time.Time{}
		w.moveClock(at)
		w.sync()
	}
}

// synced records how long each waiting change waited for the sync at now.
func (s *streaming) synced(now time.Time) {
	if !s.on {
		return
	}
	for _, t := range s.waiting {
		s.delays = append(s.delays, now.Sub(t))
	}
	s.waiting = s.waiting[:0]
}
