package multicluster

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// endpointChangePriority ranks a change to an EndpointSlice that already existed above the
// queue's default. A bulk sync (a member joining, a broker coming back) arrives as creates of
// thousands of records and slices; without this, one endpoint changing elsewhere in the
// ClusterSet waits behind all of them in every member's queue. The initial list of a restart
// is already ranked below the default by controller-runtime.
const endpointChangePriority = 10

// endpointChangesFirst maps slice events to requests with toRequests, enqueueing the requests
// of a slice's update (a new resource version: its endpoints changed) at endpointChangePriority
// and everything else as controller-runtime's mapped handler does.
func endpointChangesFirst[T client.Object](toRequests func(context.Context, T) []reconcile.Request) handler.TypedEventHandler[T, reconcile.Request] {
	mapped := handler.TypedEnqueueRequestsFromMapFunc(toRequests)
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc:  mapped.Create,
		DeleteFunc:  mapped.Delete,
		GenericFunc: mapped.Generic,
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
			if !ok || e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
				mapped.Update(ctx, e, q)
				return
			}
			priority := endpointChangePriority
			seen := map[reconcile.Request]bool{}
			for _, obj := range []T{e.ObjectOld, e.ObjectNew} {
				for _, req := range toRequests(ctx, obj) {
					if !seen[req] {
						seen[req] = true
						pq.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, req)
					}
				}
			}
		},
	}
}
