package multicluster

import (
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// When the broker's API server comes back, the broker cache lists every record and slice copy
// again and hands each unchanged one to the controllers as an update. Those run nothing; what
// changed meanwhile, what is new and what went away do.
func TestBrokerSourcesSkipUpdatesThatChangedNothing(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	informers := &informertest.FakeInformers{Scheme: scheme}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer queue.ShutDown()
	src := brokerKind(informers, &discoveryv1.EndpointSlice{},
		handler.TypedEnqueueRequestsFromMapFunc(brokerObjectToService[*discoveryv1.EndpointSlice]("")))
	if err := src.Start(ctx, queue); err != nil {
		t.Fatal(err)
	}
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	fake, err := informers.FakeInformerFor(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		t.Fatal(err)
	}
	copyOf := func(rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
			Namespace: "fleetslice-broker", Name: "member-01.shop.web-abc", ResourceVersion: rv,
			Labels: map[string]string{v1alpha1.LabelServiceNamespace: "shop", v1alpha1.LabelServiceName: "web"},
		}}
	}
	queued := func() int {
		n := queue.Len()
		for range n {
			req, _ := queue.Get()
			if req.Namespace != "shop" || req.Name != "web" {
				t.Errorf("queued %v, want shop/web", req)
			}
			queue.Forget(req)
			queue.Done(req)
		}
		return n
	}

	fake.Update(copyOf("5"), copyOf("5"))
	if n := queued(); n != 0 {
		t.Fatalf("an update with the resource version unchanged (a relist, a resync) queued %d reconciles, want none", n)
	}
	for _, step := range []struct {
		what string
		do   func()
	}{
		{"an update with a new resource version", func() { fake.Update(copyOf("5"), copyOf("6")) }},
		{"a create", func() { fake.Add(copyOf("7")) }},
		{"a delete", func() { fake.Delete(copyOf("7")) }},
	} {
		step.do()
		if n := queued(); n != 1 {
			t.Fatalf("%s queued %d reconciles, want its Service's", step.what, n)
		}
	}
}

// A peer's slice copy enqueues the import of its Service only once the peer's record of it is
// in the broker cache: before that, the sync it ran would ignore the copy, and the record's
// arrival enqueues the import anyway.
func TestCopiesEnqueueTheirImportOnceTheirRecordIsCached(t *testing.T) {
	record := &v1alpha1.ServiceExportRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "broker",
		Name: names.RecordName("east", "shop", "web"), Labels: names.RecordLabels("east", "shop", "web")}}
	r := &importReconciler{broker: brokerFake(t, nil, record), brokerNamespace: "broker", self: "west"}
	copyFrom := func(cluster string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "broker", Name: "web-" + cluster, Labels: names.RecordLabels(cluster, "shop", "web")}}
	}
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}}}
	if got := r.copyToImport(t.Context(), copyFrom("east")); !reflect.DeepEqual(got, want) {
		t.Fatalf("east's copy, its record cached: %v, want %v", got, want)
	}
	if got := r.copyToImport(t.Context(), copyFrom("north")); got != nil {
		t.Fatalf("north's copy, before its record: %v, want nothing", got)
	}
}
