package slicewrite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func slice(name string, addressType discoveryv1.AddressType) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: name},
		AddressType: addressType,
	}
}

// recorder is a fake API server that logs every write reaching it and can fail one of them.
type recorder struct {
	client.Client
	mu         sync.Mutex
	calls      []string
	failOn     string // "op name"
	deleteUIDs []types.UID
}

func newRecorder(t *testing.T, existing ...client.Object) *recorder {
	t.Helper()
	r := &recorder{}
	fail := func(op string, obj client.Object) error {
		call := op + " " + obj.GetName()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls = append(r.calls, call)
		if call == r.failOn {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
	r.Client = fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(existing...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := fail("create", obj); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := fail("update", obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := fail("delete", obj); err != nil {
				return err
			}
			o := &client.DeleteOptions{}
			o.ApplyOptions(opts)
			if o.Preconditions != nil && o.Preconditions.UID != nil {
				r.mu.Lock()
				r.deleteUIDs = append(r.deleteUIDs, *o.Preconditions.UID)
				r.mu.Unlock()
			}
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	return r
}

// stored fetches the existing objects from the fake server, as a reconciler would list them.
func stored(t *testing.T, c client.Client, names ...string) []*discoveryv1.EndpointSlice {
	t.Helper()
	out := make([]*discoveryv1.EndpointSlice, 0, len(names))
	for _, name := range names {
		s := &discoveryv1.EndpointSlice{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: name}, s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestApplyOrdersCreatesUpdatesDeletesThenReplacements(t *testing.T) {
	ipv4 := discoveryv1.AddressTypeIPv4
	r := newRecorder(t, slice("keep", ipv4), slice("gone", ipv4), slice("retyped", ipv4))
	old := stored(t, r, "keep", "gone", "retyped")
	update := old[0].DeepCopy()
	update.Labels = map[string]string{"changed": "yes"}
	changes := Changes[*discoveryv1.EndpointSlice]{
		Create: []*discoveryv1.EndpointSlice{slice("retyped", discoveryv1.AddressTypeIPv6), slice("new", ipv4)},
		Update: []*discoveryv1.EndpointSlice{update},
		Delete: []*discoveryv1.EndpointSlice{old[1], old[2]},
	}
	var observed []string
	err := Apply(context.Background(), r, changes, func(op Op, obj *discoveryv1.EndpointSlice, _ time.Duration, err error) {
		observed = append(observed, fmt.Sprintf("%s %s %v", op, obj.Name, err))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The two deletes go out together, in either order; every kind waits for the one before.
	want := []string{"create new", "update keep", "delete gone", "delete retyped", "create retyped"}
	if !slices.Equal(inGroups(r.calls, 2, 4), want) {
		t.Fatalf("writes %v, want %v", r.calls, want)
	}
	if len(observed) != len(want) {
		t.Fatalf("observed %v, want one outcome per write", observed)
	}
	for i, o := range inGroups(observed, 2, 4) {
		if o != want[i]+" <nil>" {
			t.Fatalf("outcome %d: %q, want %q", i, o, want[i]+" <nil>")
		}
	}
	if got := stored(t, r, "retyped")[0].AddressType; got != discoveryv1.AddressTypeIPv6 {
		t.Fatalf("replacement has address type %s", got)
	}
}

// inGroups sorts calls[from:to], the writes of one kind, which may land in any order.
func inGroups(calls []string, from, to int) []string {
	out := slices.Clone(calls)
	if len(out) >= to {
		slices.Sort(out[from:to])
	}
	return out
}

func TestApplyStopsAtTheFirstFailure(t *testing.T) {
	ipv4 := discoveryv1.AddressTypeIPv4
	for _, tc := range []struct {
		failOn string
		want   []string
		// maybe is a write of the failed one's kind, which may have started before the
		// failure was known; nothing of a later kind may start.
		maybe string
	}{
		{"create a", []string{"create a"}, "create b"},
		{"create b", []string{"create b"}, "create a"},
		{"update keep", []string{"create a", "create b", "update keep"}, ""},
		{"delete gone", []string{"create a", "create b", "update keep", "delete gone"}, "delete also-gone"},
	} {
		t.Run(tc.failOn, func(t *testing.T) {
			r := newRecorder(t, slice("keep", ipv4), slice("gone", ipv4), slice("also-gone", ipv4))
			r.failOn = tc.failOn
			old := stored(t, r, "keep", "gone", "also-gone")
			changes := Changes[*discoveryv1.EndpointSlice]{
				Create: []*discoveryv1.EndpointSlice{slice("a", ipv4), slice("b", ipv4)},
				Update: []*discoveryv1.EndpointSlice{old[0]},
				Delete: []*discoveryv1.EndpointSlice{old[1], old[2]},
			}
			var failures int
			err := Apply(context.Background(), r, changes, func(_ Op, _ *discoveryv1.EndpointSlice, _ time.Duration, err error) {
				if err != nil {
					failures++
				}
			})
			var writeErr *Error
			if !errors.As(err, &writeErr) || writeErr.Op+" "+Op(writeErr.Key.Name) != Op(tc.failOn) || !apierrors.IsServiceUnavailable(err) {
				t.Fatalf("error %v, want the injected failure of %q", err, tc.failOn)
			}
			made := slices.DeleteFunc(slices.Clone(r.calls), func(c string) bool { return c == tc.maybe })
			if !slices.Equal(inGroups(made, 0, 2), tc.want) {
				t.Fatalf("writes %v, want %v", r.calls, tc.want)
			}
			if failures != 1 {
				t.Fatalf("observed %d failures, want 1", failures)
			}
		})
	}
}

func TestApplyDeleteIgnoresNotFoundAndGuardsByUID(t *testing.T) {
	ipv4 := discoveryv1.AddressTypeIPv4
	seeded := slice("present", ipv4)
	seeded.UID = "uid-of-present"
	r := newRecorder(t, seeded)
	present := stored(t, r, "present")[0]
	missing := slice("missing", ipv4)
	missing.UID = "uid-of-missing"
	unknown := slice("unknown-uid", ipv4)

	var outcomes []error
	observe := func(_ Op, _ *discoveryv1.EndpointSlice, _ time.Duration, err error) { outcomes = append(outcomes, err) }
	changes := Changes[*discoveryv1.EndpointSlice]{Delete: []*discoveryv1.EndpointSlice{missing, present, unknown}}
	if err := Apply(context.Background(), r, changes, observe); err != nil {
		t.Fatalf("deleting slices that are already gone must succeed: %v", err)
	}
	if len(outcomes) != 3 || outcomes[0] != nil || outcomes[1] != nil || outcomes[2] != nil {
		t.Fatalf("outcomes %v, want three successes", outcomes)
	}
	// A successor under the same name has another UID, so the API server refuses the delete.
	slices.Sort(r.deleteUIDs)
	if want := []types.UID{"uid-of-missing", present.UID}; !slices.Equal(r.deleteUIDs, want) {
		t.Fatalf("UID preconditions %v, want %v (none for an object without a UID)", r.deleteUIDs, want)
	}
}

func TestApplyWithoutObserverOrChanges(t *testing.T) {
	r := newRecorder(t)
	if err := Apply(context.Background(), r, Changes[*discoveryv1.EndpointSlice]{}, nil); err != nil || len(r.calls) != 0 {
		t.Fatalf("empty changes: err %v, writes %v", err, r.calls)
	}
	if err := Apply(context.Background(), r, Changes[*discoveryv1.EndpointSlice]{Create: []*discoveryv1.EndpointSlice{slice("a", discoveryv1.AddressTypeIPv4)}}, nil); err != nil {
		t.Fatal(err)
	}
}

// blockingWriter holds every update until want of them are in flight at once, so Apply can only
// finish if it makes one kind's writes side by side; it gives up after a while so that a
// sequential Apply fails the test instead of hanging it.
type blockingWriter struct {
	client.Writer
	want     int
	mu       sync.Mutex
	inFlight int
	peak     int
	all      chan struct{}
}

func (b *blockingWriter) Update(ctx context.Context, obj client.Object, _ ...client.UpdateOption) error {
	b.mu.Lock()
	b.inFlight++
	b.peak = max(b.peak, b.inFlight)
	if b.inFlight == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(2 * time.Second):
	}
	b.mu.Lock()
	b.inFlight--
	b.mu.Unlock()
	return nil
}

func TestApplyMakesOneKindsWritesSideBySideAndObservesThemOneAtATime(t *testing.T) {
	const n = 5
	b := &blockingWriter{want: n, all: make(chan struct{})}
	var updates []*discoveryv1.EndpointSlice
	for i := range n {
		updates = append(updates, slice(fmt.Sprintf("s%d", i), discoveryv1.AddressTypeIPv4))
	}
	var observing, overlapped, observed int
	var mu sync.Mutex
	err := Apply(context.Background(), b, Changes[*discoveryv1.EndpointSlice]{Update: updates},
		func(_ Op, _ *discoveryv1.EndpointSlice, took time.Duration, err error) {
			mu.Lock()
			observing++
			if observing > 1 {
				overlapped++
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			observing--
			observed++
			mu.Unlock()
		})
	if err != nil {
		t.Fatal(err)
	}
	if b.peak != n {
		t.Fatalf("at most %d updates were in flight at once, want all %d", b.peak, n)
	}
	if overlapped != 0 || observed != n {
		t.Fatalf("observer ran %d times, %d of them beside another call", observed, overlapped)
	}
}

func TestApplyKeepsAtMostMaxInFlightWrites(t *testing.T) {
	b := &blockingWriter{want: MaxInFlight + 1, all: make(chan struct{})}
	close(b.all) // release every write at once: only the bound holds them back
	var updates []*discoveryv1.EndpointSlice
	for i := range 3 * MaxInFlight {
		updates = append(updates, slice(fmt.Sprintf("s%d", i), discoveryv1.AddressTypeIPv4))
	}
	if err := Apply(context.Background(), b, Changes[*discoveryv1.EndpointSlice]{Update: updates}, nil); err != nil {
		t.Fatal(err)
	}
	if b.peak > MaxInFlight {
		t.Fatalf("%d writes in flight at once, above the bound of %d", b.peak, MaxInFlight)
	}
}

// serialWriter is a blockingWriter that asks for its writes one at a time, and logs their order.
type serialWriter struct {
	*blockingWriter
	order []string
}

func (s *serialWriter) WritesOneAtATime() bool { return true }

func (s *serialWriter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	s.mu.Lock()
	s.order = append(s.order, obj.GetName())
	s.mu.Unlock()
	return s.blockingWriter.Update(ctx, obj, opts...)
}

func TestApplyWritesOneAtATimeInListOrderForASerialWriter(t *testing.T) {
	s := &serialWriter{blockingWriter: &blockingWriter{want: 0, all: make(chan struct{})}}
	close(s.all)
	var updates []*discoveryv1.EndpointSlice
	var want []string
	for i := range 2 * MaxInFlight {
		name := fmt.Sprintf("s%02d", 2*MaxInFlight-i) // not in name order: list order is what counts
		updates = append(updates, slice(name, discoveryv1.AddressTypeIPv4))
		want = append(want, name)
	}
	if err := Apply(context.Background(), s, Changes[*discoveryv1.EndpointSlice]{Update: updates}, nil); err != nil {
		t.Fatal(err)
	}
	if s.peak != 1 || !slices.Equal(s.order, want) {
		t.Fatalf("a serial writer had %d writes in flight at once, in the order %v; want one at a time in %v", s.peak, s.order, want)
	}
}
