package multicluster

import (
	"context"
	"maps"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// nodeDemand returns the Lease renewer's demand function: the member's Node CPU read from the
// manager's cache (the EndpointSlice controller watches Nodes anyway), and its ClusterProperties
// read from the API server (uncached: a handful of objects, and their CRD may be missing).
// Peers divide a Service's traffic across clusters by the CPU, as zone hints divide it across
// zones, and match cluster selectors (KEP-5939) against the properties. A part that cannot be
// read is left out, so that the last published value stays.
func nodeDemand(nodes, properties client.Reader) func(ctx context.Context) map[string]string {
	return func(ctx context.Context) map[string]string {
		out := map[string]string{}
		list := &corev1.NodeList{}
		if err := nodes.List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing Nodes to publish this member's CPU; keeping the last published value")
		} else {
			ptrs := make([]*corev1.Node, len(list.Items))
			for i := range list.Items {
				ptrs[i] = &list.Items[i]
			}
			maps.Copy(out, locality.CPUFromNodes(ptrs).Annotations())
		}
		if properties != nil {
			props, err := clusterid.ReadAll(ctx, properties)
			if err != nil {
				log.FromContext(ctx).Error(err, "reading ClusterProperties to publish them; keeping the last published value")
			} else {
				out[v1alpha1.AnnotationClusterProperties] = clusterselect.FormatProperties(props)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
}

// demandState is the last demand the renewer read, published by every renewal.
type demandState struct {
	demandMu sync.Mutex
	// latest is every part of the demand as last read; a part that could not be read keeps its
	// value from an earlier read.
	latest map[string]string
	// firstRead is closed once the first read has ended, whatever it found.
	firstRead     chan struct{}
	firstReadOnce sync.Once
}

func (d *demandState) firstReadDone() chan struct{} {
	d.demandMu.Lock()
	defer d.demandMu.Unlock()
	if d.firstRead == nil {
		d.firstRead = make(chan struct{})
	}
	return d.firstRead
}

// refreshDemand reads the demand every renew interval until ctx ends, each read bounded by the
// interval, so a member API server that hangs delays nothing but the demand itself.
func (r *leaseRenewer) refreshDemand(ctx context.Context) {
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		r.readDemand(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// readDemand reads the demand once, bounded by the renew interval, and keeps what it found.
func (r *leaseRenewer) readDemand(ctx context.Context) {
	readCtx, cancel := context.WithTimeout(ctx, r.interval)
	now := r.demand(readCtx)
	cancel()
	r.demandMu.Lock()
	if now != nil {
		r.latest = mergeDemand(r.latest, now)
	}
	r.demandMu.Unlock()
	r.firstReadOnce.Do(func() { close(r.firstReadDone()) })
}

// awaitDemand waits until the first read has ended, at most within.
func (r *leaseRenewer) awaitDemand(ctx context.Context, within time.Duration) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-r.firstReadDone():
	case <-timer.C:
	case <-ctx.Done():
	}
}

// demandAnnotations merges the last demand read into a Lease's annotations. A part that was
// never read keeps the last published value: peers keep allocating by it rather than treating
// this member as one without clients.
func (r *leaseRenewer) demandAnnotations(have map[string]string) map[string]string {
	r.demandMu.Lock()
	now := maps.Clone(r.latest)
	r.demandMu.Unlock()
	if len(now) == 0 {
		return have
	}
	return mergeDemand(have, now)
}

// mergeDemand returns have with the demand now written over it; Node CPU published per worker
// replaces the older per-zone form.
func mergeDemand(have, now map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	if _, ok := now[allocation.AnnotationWorkerMilliCPU]; ok {
		delete(out, allocation.AnnotationZoneMilliCPU)
	}
	maps.Copy(out, now)
	return out
}

// demandChanges re-enqueues every ServiceImport when a member's published CPU or
// ClusterProperties change, which move every allocation and cluster selector result; renewals
// that change nothing else are filtered out first.
func demandChanges(local client.Reader) (handler.TypedEventHandler[*coordinationv1.Lease, reconcile.Request], predicate.TypedPredicate[*coordinationv1.Lease]) {
	changed := predicate.TypedFuncs[*coordinationv1.Lease]{
		CreateFunc:  func(event.TypedCreateEvent[*coordinationv1.Lease]) bool { return true },
		DeleteFunc:  func(event.TypedDeleteEvent[*coordinationv1.Lease]) bool { return true },
		GenericFunc: func(event.TypedGenericEvent[*coordinationv1.Lease]) bool { return false },
		UpdateFunc: func(e event.TypedUpdateEvent[*coordinationv1.Lease]) bool {
			return demandOf(e.ObjectOld) != demandOf(e.ObjectNew)
		},
	}
	enqueue := handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, _ *coordinationv1.Lease) []reconcile.Request {
		list := &mcsv1beta1.ServiceImportList{}
		if err := local.List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing ServiceImports after a member's CPU changed; their next event recomputes the allocation")
			return nil
		}
		out := make([]reconcile.Request, len(list.Items))
		for i := range list.Items {
			out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
		}
		return out
	})
	return enqueue, changed
}

func demandOf(l *coordinationv1.Lease) [3]string {
	if l == nil {
		return [3]string{}
	}
	return [3]string{l.Annotations[allocation.AnnotationWorkerMilliCPU], l.Annotations[allocation.AnnotationZoneMilliCPU],
		l.Annotations[v1alpha1.AnnotationClusterProperties]}
}
