package multicluster

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// writeLog is a fake API server that logs writes and refuses creates of one name. Writes of one
// kind arrive side by side (slicewrite), so the log takes them one at a time.
func writeLog(refuse string, existing ...client.Object) (client.Client, *[]string) {
	var (
		calls []string
		mu    sync.Mutex
	)
	logCall := func(call string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(existing...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			logCall("create " + obj.GetName())
			if obj.GetName() == refuse {
				return apierrors.NewServiceUnavailable("injected")
			}
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			logCall("delete " + obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	return c, &calls
}

// A compaction in the source cluster replaces two slices by one: the import must create the
// new imported slice before deleting the old ones, and count each write once, as it ended.
func TestImportedSlicesAreCreatedBeforeDeletesAndCountedOnce(t *testing.T) {
	old := []discoveryv1.EndpointSlice{*builders.MakeImportedSlice("shop", "old-1", "", "east").Obj(), *builders.MakeImportedSlice("shop", "old-2", "", "east").Obj()}
	compacted := builders.MakeImportedSlice("shop", "compacted", "", "east").Obj()
	local, calls := writeLog("", &old[0], &old[1])
	w := importWriter{c: local}

	created := counterValue(t, importedEndpointSlices.WithLabelValues("create"))
	deleted := counterValue(t, importedEndpointSlices.WithLabelValues("delete"))
	writes := counterValue(t, localWrites.WithLabelValues("endpointslice", "create", "success"))
	if err := w.writeSlices(context.Background(), sliceplan.Plan([]*discoveryv1.EndpointSlice{compacted}, old)); err != nil {
		t.Fatal(err)
	}
	// The two deletes go out together, in either order, after the create.
	got := slices.Clone(*calls)
	if len(got) == 3 {
		slices.Sort(got[1:])
	}
	if want := []string{"create compacted", "delete old-1", "delete old-2"}; !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v", *calls, want)
	}
	if got := counterValue(t, importedEndpointSlices.WithLabelValues("create")) - created; got != 1 {
		t.Fatalf("counted %v imported creates, want 1", got)
	}
	if got := counterValue(t, importedEndpointSlices.WithLabelValues("delete")) - deleted; got != 2 {
		t.Fatalf("counted %v imported deletes, want 2", got)
	}
	if got := counterValue(t, localWrites.WithLabelValues("endpointslice", "create", "success")) - writes; got != 1 {
		t.Fatalf("counted %v successful local creates, want 1", got)
	}
}

// A refused create leaves the old slices in place and is counted as a failed write, not as an
// imported-slice change.
func TestRefusedImportedCreateKeepsTheOldSlices(t *testing.T) {
	old := []discoveryv1.EndpointSlice{*builders.MakeImportedSlice("shop", "old-1", "", "east").Obj()}
	local, calls := writeLog("replacement", &old[0])
	w := importWriter{c: local}

	created := counterValue(t, importedEndpointSlices.WithLabelValues("create"))
	failed := counterValue(t, localWrites.WithLabelValues("endpointslice", "create", "error"))
	err := w.writeSlices(context.Background(), sliceplan.Plan([]*discoveryv1.EndpointSlice{builders.MakeImportedSlice("shop", "replacement", "", "east").Obj()}, old))
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("error %v, want the refused create", err)
	}
	if want := []string{"create replacement"}; !slices.Equal(*calls, want) {
		t.Fatalf("writes %v, want %v: nothing may be deleted after a failed create", *calls, want)
	}
	if got := counterValue(t, importedEndpointSlices.WithLabelValues("create")) - created; got != 0 {
		t.Fatalf("a refused create was counted as %v imported change(s)", got)
	}
	if got := counterValue(t, localWrites.WithLabelValues("endpointslice", "create", "error")) - failed; got != 1 {
		t.Fatalf("counted %v failed creates, want 1", got)
	}
}

// The export publishes broker copies the same way: new copies before old ones go.
func TestBrokerCopiesAreCreatedBeforeDeletes(t *testing.T) {
	old := []discoveryv1.EndpointSlice{*builders.MakeImportedSlice("broker", "east.shop.old", "", "east").Obj()}
	broker, calls := writeLog("", &old[0])
	r := &exportReconciler{broker: broker}
	if err := r.applyBrokerSlices(context.Background(), types.NamespacedName{Namespace: "shop", Name: "web"}, sliceplan.Plan([]*discoveryv1.EndpointSlice{builders.MakeImportedSlice("broker", "east.shop.new", "", "east").Obj()}, old)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"create east.shop.new", "delete east.shop.old"}; !slices.Equal(*calls, want) {
		t.Fatalf("writes %v, want %v", *calls, want)
	}
}
