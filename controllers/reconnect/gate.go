// Package reconnect keeps informers from sleeping through an API server's return. client-go's
// reflector waits after every failed list or watch, 0.8 s doubling to 30 s (up to 60 s with
// jitter), so after an outage of a minute a cache could learn of the server's return half a
// minute late, and every change made meanwhile with it. A list or watch through a Gate that finds
// the server unreachable waits at the gate instead, while one prober asks the server every
// interval whether it answers; when it does, every waiting list and watch goes on at once, and
// the reflector never saw a failure to back off from.
package reconnect

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// DefaultProbeInterval is how often a gate asks an API server that stopped answering whether
// it answers again, while its caches wait to list or watch.
const DefaultProbeInterval = 250 * time.Millisecond

// Gate holds the lists and watches of one API server's caches while it does not answer; the
// zero value is not usable: set Probe and Interval.
type Gate struct {
	// Server names the API server in the waits metric: "member" or "broker".
	Server string
	// Probe is one cheap request; the server answers when it returns nil or a refusal (see
	// Unreachable).
	Probe    func(ctx context.Context) error
	Interval time.Duration
	// Answered, when set, learns of every answer (a member's view of a broker outage).
	Answered func(error)

	mu      sync.Mutex
	back    chan struct{} // closed by the prober once the server answers; nil while none runs
	waiters int
}

// wait returns once the server answers again, or with ctx's error. The first waiter starts the
// prober; the prober stops once the server answers or nobody waits any longer.
func (g *Gate) wait(ctx context.Context) error {
	g.mu.Lock()
	if g.back == nil {
		g.back = make(chan struct{})
		go g.probeUntilAnswered(g.back)
	}
	back := g.back
	g.waiters++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiters--
		g.mu.Unlock()
	}()
	select {
	case <-back:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waiting is how many lists and watches wait at the gate.
func (g *Gate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters
}

func (g *Gate) probeUntilAnswered(back chan struct{}) {
	t := time.NewTicker(g.Interval)
	defer t.Stop()
	for range t.C {
		if g.waiting() == 0 {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(g.Interval, time.Second))
		err := g.Probe(ctx)
		cancel()
		if !Unreachable(err) {
			if g.Answered != nil {
				g.Answered(err)
			}
			break
		}
	}
	g.mu.Lock()
	g.back = nil
	close(back)
	g.mu.Unlock()
}

// Unreachable reports whether err says the server did not answer: no response at all (refused,
// reset, timed out) or 503 from an API server still starting. Other answers, refusals and
// overload (429, which client-go's own retries handle) included, mean it is there.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	return !errors.As(err, &status) || apierrors.IsServiceUnavailable(err)
}

// gatedListerWatcher lists and watches through lw, waiting at g while the server does not
// answer instead of failing to the reflector.
type gatedListerWatcher struct {
	lw   toolscache.ListerWatcherWithContext
	gate *Gate
	// inner is lw as given: whether it serves streaming lists (WatchList) is its to say.
	inner toolscache.ListerWatcher
}

// IsWatchListSemanticsUnSupported passes on what the wrapped lister-watcher says of streaming
// lists, which the reflector asks before it uses them.
func (l gatedListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.inner)
}

func (l gatedListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return throughGate(ctx, l.gate, func() (runtime.Object, error) { return l.lw.ListWithContext(ctx, opts) })
}

func (l gatedListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return throughGate(ctx, l.gate, func() (watch.Interface, error) { return l.lw.WatchWithContext(ctx, opts) })
}

// throughGate calls call until the server answers it, waiting at g after each call that found
// the server unreachable; it returns the last call's result when ctx ends.
func throughGate[T any](ctx context.Context, g *Gate, call func() (T, error)) (T, error) {
	for {
		out, err := call()
		if !Unreachable(err) || ctx.Err() != nil {
			return out, err
		}
		waits.WithLabelValues(g.Server).Inc()
		if g.wait(ctx) != nil {
			return out, err
		}
	}
}

// List and Watch serve callers without a context; the reflector uses the context variants.
func (l gatedListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l gatedListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// NewInformer builds informers that list and watch through the gate: a cache.Options.NewInformer.
func (g *Gate) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	gated := gatedListerWatcher{lw: toolscache.ToListerWatcherWithContext(lw), gate: g, inner: lw}
	return toolscache.NewSharedIndexInformer(gated, obj, resync, indexers)
}
