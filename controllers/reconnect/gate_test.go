package reconnect

import (
	"context"
	"io"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeServer answers or not, and counts the probes and how many ran at once.
type fakeServer struct {
	down     atomic.Bool
	probes   atomic.Int64
	inFlight atomic.Int64
	maxAtOne atomic.Int64
}

var errNoAnswer = &url.Error{Op: "Get", URL: "https://server.example:6443/api", Err: io.EOF}

func (f *fakeServer) probe(context.Context) error {
	n := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for {
		m := f.maxAtOne.Load()
		if n <= m || f.maxAtOne.CompareAndSwap(m, n) {
			break
		}
	}
	f.probes.Add(1)
	if f.down.Load() {
		return errNoAnswer
	}
	return nil
}

func newTestGate(f *fakeServer, answered func(error)) *Gate {
	return &Gate{Probe: f.probe, Interval: 10 * time.Millisecond, Answered: answered}
}

func TestReconnectGateReleasesEveryWaiterOnceTheServerAnswers(t *testing.T) {
	f := &fakeServer{}
	f.down.Store(true)
	var answers atomic.Int64
	g := newTestGate(f, func(err error) {
		if err != nil {
			t.Errorf("answered with %v", err)
		}
		answers.Add(1)
	})
	var wg sync.WaitGroup
	var released atomic.Int64
	for range 5 {
		wg.Go(func() {
			if err := g.wait(context.Background()); err != nil {
				t.Errorf("wait: %v", err)
			}
			released.Add(1)
		})
	}
	// Every waiter at the gate before the server answers, however slowly the goroutines start:
	// one that came later would start a prober of its own.
	waitFor(t, "five waiters and five probes", func() bool { return g.waiting() == 5 && f.probes.Load() >= 5 })
	if n := released.Load(); n != 0 {
		t.Fatalf("%d waiters went on while the server did not answer", n)
	}
	f.down.Store(false)
	wg.Wait()
	if m := f.maxAtOne.Load(); m != 1 {
		t.Errorf("%d probes ran at once, want one prober for all waiters", m)
	}
	if n := answers.Load(); n != 1 {
		t.Errorf("the outage view learned of %d answers, want 1", n)
	}
	// The prober is gone: a new failure starts a new one.
	before := f.probes.Load()
	if err := g.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.probes.Load() != before+1 {
		t.Errorf("a wait on an answering server took %d probes, want 1", f.probes.Load()-before)
	}
}

func TestReconnectGateStopsProbingWhenNobodyWaits(t *testing.T) {
	f := &fakeServer{}
	f.down.Store(true)
	g := newTestGate(f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.wait(ctx) }()
	for f.probes.Load() < 3 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("wait = %v, want context.Canceled", err)
	}
	waitFor(t, "the prober's end", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.back == nil
	})
	stopped := f.probes.Load()
	time.Sleep(10 * g.Interval)
	if n := f.probes.Load() - stopped; n != 0 {
		t.Errorf("%d probes after the last waiter left", n)
	}
}

func TestUnreachableTellsNoAnswerFromAnAnswer(t *testing.T) {
	gr := schema.GroupResource{Resource: "leases"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errNoAnswer, true},
		{context.DeadlineExceeded, true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewForbidden(gr, "x", nil), false},
		{apierrors.NewTooManyRequests("busy", 1), false},
		{apierrors.NewInternalError(io.EOF), false},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// fakeListerWatcher serves ConfigMaps from a slice and watches through fake watchers; while
// the server is down every list and watch fails as an unreachable server does.
type fakeListerWatcher struct {
	server *fakeServer
	mu     sync.Mutex
	items  []corev1.ConfigMap
	w      *watch.FakeWatcher
	// watched is when the current watch began.
	watched time.Time
	calls   atomic.Int64
}

func (l *fakeListerWatcher) List(metav1.ListOptions) (runtime.Object, error) {
	l.calls.Add(1)
	if l.server.down.Load() {
		return nil, errNoAnswer
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: append([]corev1.ConfigMap(nil), l.items...)}, nil
}

func (l *fakeListerWatcher) Watch(metav1.ListOptions) (watch.Interface, error) {
	l.calls.Add(1)
	if l.server.down.Load() {
		return nil, errNoAnswer
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w, l.watched = watch.NewFakeWithChanSize(10, false), time.Now()
	return l.w, nil
}

// IsWatchListSemanticsUnSupported keeps the reflector on lists and watches, which the fake serves.
func (l *fakeListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// cut stops the server answering and ends the current watch, as a server going down does.
func (l *fakeListerWatcher) cut() {
	l.server.down.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		l.w.Stop()
	}
}

// A server outage reaches the server cache's reflector as no failure at all, so it never backs
// off (0.8 s doubling to 30 s): its watch waits at the gate and goes on once the server answers.
func TestServerCacheWaitsOutAnOutageWithoutAReflectorFailure(t *testing.T) {
	f := &fakeServer{}
	lw := &fakeListerWatcher{server: f, items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "one", ResourceVersion: "1"}}}}
	g := newTestGate(f, nil)
	g.Server = "outage-test"
	inf := g.NewInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	var failures atomic.Int64
	if err := inf.SetWatchErrorHandler(func(_ *toolscache.Reflector, err error) {
		t.Logf("the reflector saw %v", err)
		failures.Add(1)
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.Run(ctx.Done())
	waitFor(t, "the first sync and watch", func() bool {
		lw.mu.Lock()
		defer lw.mu.Unlock()
		return inf.HasSynced() && lw.w != nil
	})
	// Let the watch outlive the reflector's "very short watch" check (1 s from its start), as a
	// real one does.
	lw.mu.Lock()
	watched := lw.watched
	lw.mu.Unlock()
	time.Sleep(time.Until(watched.Add(1100 * time.Millisecond)))

	lw.cut()
	waitFor(t, "probes while the server is down", func() bool { return f.probes.Load() >= 5 })
	f.down.Store(false)
	waitFor(t, "the watch after the outage", func() bool {
		lw.mu.Lock()
		defer lw.mu.Unlock()
		return lw.w != nil && !lw.w.IsStopped()
	})
	lw.mu.Lock()
	lw.w.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "two", ResourceVersion: "2"}})
	lw.mu.Unlock()
	waitFor(t, "the change made after the outage", func() bool {
		_, ok, _ := inf.GetStore().GetByKey("b/two")
		return ok
	})
	if n := failures.Load(); n != 0 {
		t.Errorf("the reflector saw %d failures, so it backed off", n)
	}
	if n := testutil.ToFloat64(waits.WithLabelValues(g.Server)); n < 1 {
		t.Errorf("the waits metric counted %v waits through the outage", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
