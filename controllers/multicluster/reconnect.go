package multicluster

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

// DefaultReconnectProbeInterval is how often a member asks a broker that stopped answering
// whether it answers again, while its broker cache waits to list or watch.
const DefaultReconnectProbeInterval = 250 * time.Millisecond

// reconnectGate keeps the broker cache from sleeping through the broker's return. client-go's
// reflector waits after every failed list or watch, 0.8 s doubling to 30 s (up to 60 s with
// jitter), so after a minute-long outage a member's broker cache could learn of the broker's
// return half a minute late, and every import of a change made meanwhile with it. A list or
// watch that finds the broker unreachable waits here instead, and one prober per member asks
// the broker every interval whether it answers; when it does, every waiting list and watch goes
// on at once, and the reflector never saw a failure to back off from.
type reconnectGate struct {
	// probe is one cheap broker request; the broker answers when it returns nil or a refusal.
	probe    func(ctx context.Context) error
	interval time.Duration
	// answered, when set, learns of every answer (the member's outage view).
	answered func(error)

	mu      sync.Mutex
	back    chan struct{} // closed by the prober once the broker answers; nil while none runs
	waiters int
}

// wait returns once the broker answers again, or with ctx's error. The first waiter starts the
// prober; the prober stops once the broker answers or nobody waits any longer.
func (g *reconnectGate) wait(ctx context.Context) error {
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
func (g *reconnectGate) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters
}

func (g *reconnectGate) probeUntilAnswered(back chan struct{}) {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for range t.C {
		if g.waiting() == 0 {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(g.interval, time.Second))
		err := g.probe(ctx)
		cancel()
		if !unreachable(err) {
			if g.answered != nil {
				g.answered(err)
			}
			break
		}
	}
	g.mu.Lock()
	g.back = nil
	close(back)
	g.mu.Unlock()
}

// unreachable reports whether err says the broker did not answer: no response at all (refused,
// reset, timed out) or 503 from an API server still starting. Other answers, refusals and
// overload (429, which client-go's own retries handle) included, mean it is there.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	return !errors.As(err, &status) || apierrors.IsServiceUnavailable(err)
}

// gatedListerWatcher lists and watches through lw, waiting at g while the broker does not
// answer instead of failing to the reflector.
type gatedListerWatcher struct {
	lw   toolscache.ListerWatcherWithContext
	gate *reconnectGate
	// inner is lw as given: whether it serves streaming lists (WatchList) is its to say.
	inner toolscache.ListerWatcher
}

// IsWatchListSemanticsUnSupported passes on what the wrapped lister-watcher says of streaming
// lists, which the reflector asks before it uses them.
func (l gatedListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(l.inner)
}

func (l gatedListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	for {
		obj, err := l.lw.ListWithContext(ctx, opts)
		if !unreachable(err) || ctx.Err() != nil || l.gate.wait(ctx) != nil {
			return obj, err
		}
	}
}

func (l gatedListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	for {
		w, err := l.lw.WatchWithContext(ctx, opts)
		if !unreachable(err) || ctx.Err() != nil || l.gate.wait(ctx) != nil {
			return w, err
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

// newGatedInformer is the broker cache's informer constructor (cache.Options.NewInformer).
func (g *reconnectGate) newGatedInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	gated := gatedListerWatcher{lw: toolscache.ToListerWatcherWithContext(lw), gate: g, inner: lw}
	return toolscache.NewSharedIndexInformer(gated, obj, resync, indexers)
}
