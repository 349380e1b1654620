// Package coalesce decides when a Service's Pod changes are synced: at once when they come alone,
// once per burst when they come in bursts. It is pure (the caller passes the time), so the
// EndpointSlice reconciler and the in-process bench drive the same decisions.
package coalesce

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Coalescer decides when a Service's Pod changes are synced, so that a Service under churn (a
// rollout, a scale-up) gets one write per burst instead of one per Pod event, while a lone change
// is written at once:
//   - a change that follows a quiet spell of at least quiet is synced immediately;
//   - a change that follows another within quiet opens a window that closes once no change has
//     come for quiet, and never later than budget after the window's first change.
//
// So the delay it adds to any change is at most budget, and it adds none to changes that come
// alone. Both times are flags; budget 0 turns coalescing off (every change syncs at once, as
// kube-controller-manager's controller with its default batch period of 0).
//
// The workqueue keeps the earliest of several delays for one key, so a sync can be woken before
// its window closes; the reconciler asks Hold first and waits out the rest.
type Coalescer struct {
	quiet, budget time.Duration

	mu    sync.Mutex
	state map[types.NamespacedName]*churn
}

// churn is one Service's changes not synced yet.
type churn struct {
	// pending is set while changes wait for a sync; first and last are the first and latest of
	// them (last stays as the latest change ever, to tell a lone change from a burst).
	pending     bool
	first, last time.Time
	// lone is set when the pending changes began after a quiet spell: they sync at once.
	lone bool
}

// New returns a Coalescer with a quiet period and a budget; budget 0 turns coalescing off.
func New(quiet, budget time.Duration) *Coalescer {
	return &Coalescer{quiet: quiet, budget: budget, state: map[types.NamespacedName]*churn{}}
}

// Enabled reports whether changes are coalesced at all.
func (c *Coalescer) Enabled() bool { return c.budget > 0 }

// Changed records a change of svc at now and returns how long to wait before syncing it.
func (c *Coalescer) Changed(svc types.NamespacedName, now time.Time) time.Duration {
	if !c.Enabled() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state[svc]
	if s == nil {
		s = &churn{}
		c.state[svc] = s
	}
	if !s.pending {
		s.pending = true
		s.first = now
		s.lone = s.last.IsZero() || now.Sub(s.last) >= c.quiet
	}
	s.last = now
	return max(0, c.due(s).Sub(now))
}

// due is when a Service's pending changes should be synced.
func (c *Coalescer) due(s *churn) time.Time {
	if s.lone {
		return s.first
	}
	settled := s.last.Add(c.quiet)
	if deadline := s.first.Add(c.budget); deadline.Before(settled) {
		return deadline
	}
	return settled
}

// Hold is asked when a sync of svc is about to run at now. It returns how long the sync should
// still wait for its window to close; when that is 0, the pending changes are taken by this sync.
func (c *Coalescer) Hold(svc types.NamespacedName, now time.Time) time.Duration {
	if !c.Enabled() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state[svc]
	if s == nil || !s.pending {
		return 0
	}
	if wait := c.due(s).Sub(now); wait > 0 {
		return wait
	}
	s.pending = false
	return 0
}

// Forget drops a deleted Service's state.
func (c *Coalescer) Forget(svc types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.state, svc)
}
