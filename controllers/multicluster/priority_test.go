package multicluster

import (
	"context"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A slice whose endpoints changed is reconciled before the creates of a bulk sync queued ahead
// of it; a resync (same resource version) is not promoted.
func TestEndpointChangesJumpAheadOfBulkCreates(t *testing.T) {
	toRequest := func(_ context.Context, obj client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}}
	}
	slice := func(name, rv string) client.Object {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	h := endpointChangesFirst(toRequest)
	ctx := context.Background()
	for _, name := range []string{"bulk-1", "bulk-2", "bulk-3"} {
		h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: slice(name, "1")}, q)
	}
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: slice("resynced", "5"), ObjectNew: slice("resynced", "5")}, q)
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: slice("changed", "5"), ObjectNew: slice("changed", "6")}, q)

	first, priority, _ := q.GetWithPriority()
	if first.Name != "changed" || priority != endpointChangePriority {
		t.Fatalf("first out %s at priority %d, want the changed slice at %d", first.Name, priority, endpointChangePriority)
	}
	q.Done(first)
	for range 4 {
		item, priority, _ := q.GetWithPriority()
		if item.Name == "changed" || priority > 0 {
			t.Fatalf("then %s at priority %d: only the changed slice is promoted", item.Name, priority)
		}
		q.Done(item)
	}
}
