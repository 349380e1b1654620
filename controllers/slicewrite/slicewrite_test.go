package slicewrite

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

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
	calls      []string
	failOn     string // "op name"
	deleteUIDs []types.UID
}

func newRecorder(t *testing.T, existing ...client.Object) *recorder {
	t.Helper()
	r := &recorder{}
	fail := func(op string, obj client.Object) error {
		call := op + " " + obj.GetName()
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
				r.deleteUIDs = append(r.deleteUIDs, *o.Preconditions.UID)
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
	err := Apply(context.Background(), r, changes, func(op Op, obj *discoveryv1.EndpointSlice, err error) {
		observed = append(observed, fmt.Sprintf("%s %s %v", op, obj.Name, err))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"create new", "update keep", "delete gone", "delete retyped", "create retyped"}
	if !slices.Equal(r.calls, want) {
		t.Fatalf("writes %v, want %v", r.calls, want)
	}
	if len(observed) != len(want) {
		t.Fatalf("observed %v, want one outcome per write", observed)
	}
	for i, o := range observed {
		if o != want[i]+" <nil>" {
			t.Fatalf("outcome %d: %q, want %q", i, o, want[i]+" <nil>")
		}
	}
	if got := stored(t, r, "retyped")[0].AddressType; got != discoveryv1.AddressTypeIPv6 {
		t.Fatalf("replacement has address type %s", got)
	}
}

func TestApplyStopsAtTheFirstFailure(t *testing.T) {
	ipv4 := discoveryv1.AddressTypeIPv4
	for _, tc := range []struct {
		failOn string
		want   []string
	}{
		{"create a", []string{"create a"}},
		{"create b", []string{"create a", "create b"}},
		{"update keep", []string{"create a", "create b", "update keep"}},
		{"delete gone", []string{"create a", "create b", "update keep", "delete gone"}},
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
			err := Apply(context.Background(), r, changes, func(_ Op, _ *discoveryv1.EndpointSlice, err error) {
				if err != nil {
					failures++
				}
			})
			var writeErr *Error
			if !errors.As(err, &writeErr) || writeErr.Op+" "+Op(writeErr.Key.Name) != Op(tc.failOn) || !apierrors.IsServiceUnavailable(err) {
				t.Fatalf("error %v, want the injected failure of %q", err, tc.failOn)
			}
			if !slices.Equal(r.calls, tc.want) {
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
	observe := func(_ Op, _ *discoveryv1.EndpointSlice, err error) { outcomes = append(outcomes, err) }
	changes := Changes[*discoveryv1.EndpointSlice]{Delete: []*discoveryv1.EndpointSlice{missing, present, unknown}}
	if err := Apply(context.Background(), r, changes, observe); err != nil {
		t.Fatalf("deleting slices that are already gone must succeed: %v", err)
	}
	if len(outcomes) != 3 || outcomes[0] != nil || outcomes[1] != nil || outcomes[2] != nil {
		t.Fatalf("outcomes %v, want three successes", outcomes)
	}
	// A successor under the same name has another UID, so the API server refuses the delete.
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
