// Package coalesce decides when a Service's Pod changes are synced: at once when they come alone,
// once per burst when they come in bursts, and in larger batches when the Service's own syncs are
// slow. It is pure (the caller passes the times), so the EndpointSlice reconciler and the
// in-process bench drive the same decisions.
package coalesce

import (
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Config are the coalescing times, each a flag of the manager.
type Config struct {
	// Quiet is the quiet spell after which a change syncs at once, and after which a burst is
	// considered settled.
	Quiet time.Duration
	// Window is the longest a burst that does not settle waits while the Service's syncs are
	// quick.
	Window time.Duration
	// MaxDelay is the hard cap on any change's wait, however slow the syncs; 0 turns coalescing
	// off (every change syncs at once).
	MaxDelay time.Duration
}

// BurstWindow is the window a burst gets when the Service's recent syncs took lastSync: Window
// while the syncs take no longer than Window, and beyond that lastSync²/Window, so that the share
// of the time a Service under churn spends syncing, about lastSync/window, falls as its syncs get
// slower (half at twice Window, a third at three times); never beyond MaxDelay. It is monotone in
// lastSync.
//
// Why the share falls with the sync: a sync is slow when the API server answers slowly, the very
// case in which each write costs the cluster most, and a Service whose syncs keep pace with its
// changes writes each slice again on every sync. On a healthy API server a sync of a Service under
// churn takes well under the default Window (a few round trips), so the window stays there
// and the latency with it. Measured with the endpointslice-e2e bench's 1,000-Pod rollout on a
// quiet 2-core machine (docs/benchmarks.md): with every component at its default client limits
// fleetslice's syncs took about 150 ms and kube-controller-manager synced about 7 times a second
// with a p99 network programming latency of 1.1 to 2.1 s, so any wait beyond the Window showed in
// the p99; with the cluster's own components unlimited the API server was the bottleneck,
// fleetslice's syncs took about 650 ms and kube-controller-manager's p99 was 4 to 10 s, and a
// window of twice the sync (the former rule) wrote 0.79x kube-controller-manager's writes while
// three times it wrote 0.53x at a p99 still below kube-controller-manager's.
func (c Config) BurstWindow(lastSync time.Duration) time.Duration {
	if lastSync <= c.Window {
		return min(c.Window, c.MaxDelay)
	}
	if c.Window <= 0 {
		return c.MaxDelay // no base to stretch from (the manager refuses this configuration)
	}
	// In float seconds: lastSync² in nanoseconds overflows for syncs of a few seconds.
	stretched := lastSync.Seconds() * lastSync.Seconds() / c.Window.Seconds()
	if stretched >= c.MaxDelay.Seconds() {
		return c.MaxDelay
	}
	return max(c.Window, time.Duration(math.Round(stretched*1e6))*time.Microsecond)
}

// Coalescer decides when a Service's Pod changes are synced, so that a Service under churn (a
// rollout, a scale-up) gets one write per burst instead of one per Pod event, while a lone change
// is written at once:
//   - a change that follows a quiet spell of Quiet, and does not find the Service under churn
//     (below), is synced immediately;
//   - a change that follows another within Quiet opens a window that closes once no change has
//     come for Quiet, and never later than the burst window after the window's first change:
//     Window, stretched by the duration of the Service's recent syncs (BurstWindow of the shorter
//     of its last two), at most twice the window before from one sync to the next, at most
//     MaxDelay;
//   - a change that comes within a burst window of the Service's latest sync of a burst (not of
//     a lone change) finds the Service under churn: it opens a window that runs to its end, a
//     quiet spell does not close it, and it is never synced alone.
//
// Why the shorter of the last two syncs: one slow sync is most often one large change (a
// ReplicaSet's scale step that moved endpoints in every slice), and the changes after it are no
// larger; slowness that lasts two syncs is a slow API server or a churn that keeps every slice
// busy, which is what the stretch is for. Stretching on the latest sync alone put the window at the
// cap after any sync that rewrote every slice: in the endpointslice-e2e bench at real-cluster
// client limits, where kube-controller-manager syncs the rolling Service about 16 times a second,
// those windows were fleetslice's p99 network programming latency (1.6 s against 1.2 s).
//
// Why at most twice per sync: two slow syncs in a row still happen now and then at that pace, and
// each such pair put the window straight at the cap again (with a 100 ms window, a sample of 1.9 s
// against 1.4 s); a load that lasts, as on an overloaded API server, reaches the cap within a few
// syncs all the same.
//
// So no change waits longer than MaxDelay, changes that come alone wait for nothing, on a quiet
// cluster (quick syncs) no burst waits longer than Window, and a Service under churn syncs at
// most once per burst window.
//
// Why churn overrides the quiet spell: while a Deployment creates, scales or rolls its Pods, the
// Pod events come in clumps (the ReplicaSet controller, the scheduler and the kubelets each work
// in batches) with gaps longer than Quiet between them. Each gap closed a window early, and the
// first change after it synced alone, so a steady stream of Pods becoming ready made two syncs,
// and two writes, per burst window. Replayed from the endpointslice-e2e bench's recorded Pod
// events (internal/lab/bench/slicediff's TestReplayTraces), creating 1,000 Pods took 226 syncs, each
// one write, and 137 with churn holding the window (p50 wait 312 ms, 389 ms; p99 555 ms both); a
// rollout took 1,157 writes and 755. The wait of any change stays within its burst window, as
// before. A lone change, or the first burst after one, still settles on a quiet spell.
//
// The workqueue keeps the earliest of several delays for one key, so a sync can be woken before
// its window closes; the reconciler asks Hold first and waits out the rest, and reports each
// sync's duration with Synced.
type Coalescer struct {
	cfg Config

	mu    sync.Mutex
	state map[types.NamespacedName]*churn
}

// churn is one Service's changes not synced yet, and how long its last sync took.
type churn struct {
	// pending is set while changes wait for a sync; first and last are the first and latest of
	// them (last stays as the latest change ever, to tell a lone change from a burst).
	pending     bool
	first, last time.Time
	// lone is set when the pending changes began after a quiet spell: they sync at once.
	lone bool
	// lastSync and prevSync are how long the Service's latest two finished syncs took, writes
	// included.
	lastSync, prevSync time.Duration
	// window is the burst window those syncs earned (0 before the first: the base window).
	window time.Duration
	// burstSynced is when the latest sync that took in a burst (not a lone change) began.
	burstSynced time.Time
	// churn is set when the pending changes began within a burst window of that sync.
	churn bool
}

// New returns a Coalescer; MaxDelay 0 turns coalescing off.
func New(cfg Config) *Coalescer {
	return &Coalescer{cfg: cfg, state: map[types.NamespacedName]*churn{}}
}

// Enabled reports whether changes are coalesced at all.
func (c *Coalescer) Enabled() bool { return c.cfg.MaxDelay > 0 }

// Changed records a change of svc at now and returns how long to wait before syncing it.
func (c *Coalescer) Changed(svc types.NamespacedName, now time.Time) time.Duration {
	if !c.Enabled() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.get(svc)
	if !s.pending {
		s.pending = true
		s.first = now
		s.churn = !s.burstSynced.IsZero() && now.Sub(s.burstSynced) < c.window(s)
		s.lone = !s.churn && (s.last.IsZero() || now.Sub(s.last) >= c.cfg.Quiet)
	}
	s.last = now
	return max(0, c.due(s).Sub(now))
}

func (c *Coalescer) get(svc types.NamespacedName) *churn {
	s := c.state[svc]
	if s == nil {
		s = &churn{}
		c.state[svc] = s
	}
	return s
}

// window is the Service's burst window: the base window until a sync reported otherwise.
func (c *Coalescer) window(s *churn) time.Duration {
	if s.window == 0 {
		return c.cfg.BurstWindow(0)
	}
	return s.window
}

// due is when a Service's pending changes should be synced. The burst window is read from the
// latest syncs' durations, so a sync that ends while a burst is waiting widens (or narrows) that
// burst's window; the cap holds either way.
func (c *Coalescer) due(s *churn) time.Time {
	if s.lone {
		return s.first
	}
	deadline := s.first.Add(c.window(s))
	if s.churn {
		return deadline
	}
	if settled := s.last.Add(c.cfg.Quiet); settled.Before(deadline) {
		return settled
	}
	return deadline
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
	if !s.lone {
		s.burstSynced = now
	}
	return 0
}

// Synced records how long a sync of svc took, from Hold letting it through to its last write:
// the load its next burst window adapts to.
func (c *Coalescer) Synced(svc types.NamespacedName, took time.Duration) {
	if !c.Enabled() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.get(svc)
	s.prevSync, s.lastSync = s.lastSync, max(0, took)
	// The shorter of the last two, so that one slow sync does not stretch the window, and at most
	// twice the window before.
	s.window = min(c.cfg.BurstWindow(min(s.lastSync, s.prevSync)), 2*c.window(s))
}

// Forget drops a deleted Service's state.
func (c *Coalescer) Forget(svc types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.state, svc)
}
