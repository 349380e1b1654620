package dataplane

import (
	"context"
	"errors"
	"hash/maphash"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// flakyBackend is a knftables backend on a fake that refuses the transaction holding its
// failOp-th operation, and fails its failRead-th read, counting from one over its life; zero
// never fails.
type flakyBackend struct {
	knftablesBackend
	fake             *knftables.Fake
	failOp, failRead int
	ops, reads       int
	failed           bool
}

var failureSeed = maphash.MakeSeed()

var errFlaky = errors.New("simulated: refused")

func (f *flakyBackend) apply(ctx context.Context, ops, table []ruleset.Op) error {
	first := f.ops + 1
	f.ops += ruleset.Count(ops)
	if f.failOp >= first && f.failOp <= f.ops {
		f.failed = true
		return errFlaky
	}
	return f.knftablesBackend.apply(ctx, ops, table)
}

func (f *flakyBackend) clients(ctx context.Context, name string) ([]clientEntry, error) {
	if f.reads++; f.reads == f.failRead {
		f.failed = true
		return nil, errFlaky
	}
	return f.knftablesBackend.clients(ctx, name)
}

// failureWorld is one run of failureScript.
type failureWorld struct {
	t     *testing.T
	s     *Syncer
	back  *flakyBackend
	clock *fakeClock
}

func newFailureWorld(t *testing.T, failOp, failRead int) *failureWorld {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	back := &flakyBackend{knftablesBackend: knftablesBackend{fake, ruleset.IPv4}, fake: fake, failOp: failOp, failRead: failRead}
	clock := &fakeClock{now: time.Unix(0, 0)}
	s, err := NewWithBackend(back, Options{PodCIDRs: goldenPodCIDRs, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// Raw digests are seeded per Syncer; the runs compared must digest alike.
	s.scratch.hasher.h.SetSeed(failureSeed)
	return &failureWorld{t: t, s: s, back: back, clock: clock}
}

// failureStep is one step of failureScript: it syncs and returns the Services the table must
// hold once it succeeded.
type failureStep func(w *failureWorld) ([]Service, error)

// failureScript exercises every kind of plan: full and incremental syncs, change syncs,
// affinity with clients to forget (reads), removals, stale chains and their deletion.
func failureScript() []failureStep {
	services := manyServices(4)
	sticky := tcpService("ns", "sticky", "10.96.5.1", 80, "10.244.5.1:80", "10.244.5.2:80", "10.244.5.3:80")
	sticky.AffinityTimeout = time.Hour
	sticky.Ports[0].NodePort = 30005
	all := func() []Service { return append(append([]Service(nil), services...), sticky) }
	sync := func(full bool) failureStep {
		return func(w *failureWorld) ([]Service, error) {
			_, err := w.s.Sync(context.Background(), all(), full)
			return all(), err
		}
	}
	return []failureStep{
		sync(false),
		func(w *failureWorld) ([]Service, error) {
			services[1].Ports[0].Endpoints = eps("10.244.9.1:8080", "10.244.9.2:8080", "10.244.9.3:8080")
			return sync(false)(w)
		},
		func(w *failureWorld) ([]Service, error) {
			m := renderService(&sticky, ipv4).affinity[0]
			recordClient(w.t, w.back.fake, m, "10.1.0.1", "10.244.5.1 . 80")
			recordClient(w.t, w.back.fake, m, "10.1.0.2", "10.244.5.2 . 80")
			sticky.Ports[0].Endpoints = eps("10.244.5.2:80", "10.244.5.3:80")
			return sync(false)(w)
		},
		func(w *failureWorld) ([]Service, error) {
			services = services[1:]
			return sync(false)(w)
		},
		func(w *failureWorld) ([]Service, error) {
			w.clock.Advance(time.Second)
			return sync(false)(w)
		},
		func(w *failureWorld) ([]Service, error) {
			services[0].Ports[0].Endpoints[0].Weight = 3
			_, err := w.s.SyncChanges(context.Background(), services[:1], nil)
			if errors.Is(err, ErrNeedsEverything) {
				return sync(false)(w)
			}
			return all(), err
		},
		func(w *failureWorld) ([]Service, error) {
			sticky.AffinityTimeout = 0
			return sync(false)(w)
		},
		sync(true),
	}
}

// TestFailedSyncLeavesStateAsItWas fails the backend at every operation and every read of a
// script in turn: the Syncer's state after the failed sync must equal that of a Syncer that
// never tried it, and the next sync must leave the table a fresh render of the step's Services,
// and so must every step after.
func TestFailedSyncLeavesStateAsItWas(t *testing.T) {
	clean := newFailureWorld(t, 0, 0)
	for _, step := range failureScript() {
		if _, err := step(clean); err != nil {
			t.Fatal(err)
		}
	}
	if clean.back.ops < 100 || clean.back.reads < 4 {
		t.Fatalf("the script runs %d operations and %d reads: too few to test", clean.back.ops, clean.back.reads)
	}
	for n := 1; n <= clean.back.ops; n++ {
		checkFailure(t, n, 0)
	}
	for n := 1; n <= clean.back.reads; n++ {
		checkFailure(t, 0, n)
	}
}

func checkFailure(t *testing.T, failOp, failRead int) {
	t.Helper()
	w, ref := newFailureWorld(t, failOp, failRead), newFailureWorld(t, 0, 0)
	script, refScript := failureScript(), failureScript()
	for i, step := range script {
		want, err := step(w)
		if !w.back.failed {
			if err != nil {
				t.Fatalf("op %d read %d step %d: %v", failOp, failRead, i, err)
			}
			if _, err := refScript[i](ref); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !errors.Is(err, errFlaky) {
			t.Fatalf("op %d read %d step %d: the failure was not reported: %v", failOp, failRead, i, err)
		}
		if !reflect.DeepEqual(w.s.state, ref.s.state) {
			t.Fatalf("op %d read %d step %d: the failed sync changed the Syncer's state", failOp, failRead, i)
		}
		if _, err := w.s.SyncChanges(context.Background(), nil, nil); !errors.Is(err, ErrNeedsEverything) {
			t.Fatalf("op %d read %d step %d: after a failure SyncChanges gave %v", failOp, failRead, i, err)
		}
		w.back.failed = false
		st, err := w.s.Sync(context.Background(), want, false)
		if err != nil || !st.Full {
			t.Fatalf("op %d read %d step %d: the sync after the failure: %+v, %v", failOp, failRead, i, st, err)
		}
		checkFresh(t, w, want, i)
		for j := i + 1; j < len(script); j++ {
			want, err := script[j](w)
			if err != nil {
				t.Fatalf("op %d read %d step %d after the failure: %v", failOp, failRead, j, err)
			}
			checkFresh(t, w, want, j)
		}
		return
	}
	t.Fatalf("op %d read %d: nothing failed", failOp, failRead)
}

func checkFresh(t *testing.T, w *failureWorld, services []Service, step int) {
	t.Helper()
	opts := Options{PodCIDRs: goldenPodCIDRs}
	if got, want := withoutClients(canonicalDump(w.back.fake)), freshRender(t, services, opts); got != want {
		t.Fatalf("step %d: table differs from a fresh render:\n%s", step, lineDiff(want, got))
	}
}

// withoutClients drops the elements of affinity maps from a dump: packets put them there, not
// the Syncer.
func withoutClients(dump string) string {
	var out []string
	for _, line := range strings.Split(dump, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[0] == "add" && f[1] == "element" && clientMap.MatchString(f[4]) {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

var clientMap = regexp.MustCompile(`^x?affp?-`)
