package multicluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// brokerObjectToService maps a broker record or slice copy to its exported Service; with
// onlyCluster set, only objects of that source cluster are mapped.
func brokerObjectToService[T client.Object](onlyCluster string) func(context.Context, T) []reconcile.Request {
	return func(_ context.Context, obj T) []reconcile.Request {
		if onlyCluster != "" && obj.GetLabels()[v1alpha1.LabelSourceCluster] != onlyCluster {
			return nil
		}
		ns, name, ok := brokerServiceOf(obj)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	}
}

// brokerKind is a source of one kind of broker object for the export and import controllers:
// every event but an update that changed nothing. The broker cache lists everything again when
// it watches anew, as after the broker's API server restarts (a new watch cache cannot resume a
// watch begun before it), and every unchanged object of that list comes as an update: each would
// run its Service's export and import once more, in every member at once, at the moment the
// members' writes of what did change need the CPU, and none of them would write. What changed
// while the cache did not watch comes with a new resource version, and what went away as a
// delete. The members' own objects, which the same controllers read, keep controller-runtime's
// periodic resync.
func brokerKind[T client.Object](c cache.Cache, obj T, h handler.TypedEventHandler[T, reconcile.Request]) source.TypedSyncingSource[reconcile.Request] {
	return source.Kind(c, obj, h, predicate.TypedResourceVersionChangedPredicate[T]{})
}

// sourceSliceToService maps a local slice of a Service to that Service's export.
func sourceSliceToService(_ context.Context, obj client.Object) []reconcile.Request {
	services := localSourceService(obj)
	if len(services) == 0 {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: services[0]}}}
}

// sliceToImport maps an imported slice to its ServiceImport, and a local slice of a Service
// this cluster exports to that Service's import (its own endpoints are part of it).
func (r *importReconciler) sliceToImport(ctx context.Context, obj client.Object) []reconcile.Request {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil
	}
	if sliceplan.IsOurs(slice) {
		if name := slice.Labels[mcsv1beta1.LabelServiceName]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: slice.Namespace, Name: name}}}
		}
		return nil
	}
	name := slice.Labels[discoveryv1.LabelServiceName]
	if name == "" || !r.recordExists(ctx, r.self, slice.Namespace, name) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: slice.Namespace, Name: name}}}
}

// derivedToImport maps a derived Service to its import, bound by name and label rather than by
// an owner reference (see names.ImportOfDerived).
func derivedToImport(_ context.Context, obj client.Object) []reconcile.Request {
	name, ok := names.ImportOfDerived(obj.GetNamespace(), obj.GetName(), obj.GetLabels()[mcsv1beta1.LabelServiceName])
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// namespaceToImports maps a namespace to every exported Service in it, so that a namespace
// created after the export still gets its imports.
func (r *importReconciler) namespaceToImports(ctx context.Context, obj client.Object) []reconcile.Request {
	if _, ok := obj.(*corev1.Namespace); !ok {
		return nil
	}
	records := &v1alpha1.ServiceExportRecordList{}
	if err := r.broker.List(ctx, records, client.InNamespace(r.brokerNamespace), client.MatchingFields{indexBrokerNamespace: obj.GetName()}); err != nil {
		// The cache is the only source; an index error means a programming mistake, worth seeing.
		log.FromContext(ctx).Error(err, "listing broker records for a namespace; its imports wait for their next event", "namespace", obj.GetName())
		return nil
	}
	return requestsForBrokerObjects(records.Items)
}

// recordExists tells whether cluster exports namespace/name, as the broker cache knows. A
// failed read is logged and answered no: the record's own events requeue the import.
func (r *importReconciler) recordExists(ctx context.Context, cluster, namespace, name string) bool {
	record := &v1alpha1.ServiceExportRecord{}
	err := r.broker.Get(ctx, client.ObjectKey{Namespace: r.brokerNamespace, Name: names.RecordName(cluster, namespace, name)}, record)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "reading a broker record", "cluster", cluster, "service", namespace+"/"+name)
	}
	return err == nil
}

// copyToImport maps a broker slice copy to the import of its Service once the copy's cluster
// has a record of the Service in the broker cache. A member publishes a copy before its record,
// and an import sync reads the copies of the clusters whose records it has only: the record's
// arrival enqueues the import, with the copy already there. Mapped regardless, every copy
// arriving ran a sync that wrote nothing: one per Service in every peer of a joining member,
// one per exporter and Service in a bulk start.
func (r *importReconciler) copyToImport(ctx context.Context, slice *discoveryv1.EndpointSlice) []reconcile.Request {
	namespace, name, ok := brokerServiceOf(slice)
	cluster := slice.Labels[v1alpha1.LabelSourceCluster]
	if !ok || cluster == "" || !r.recordExists(ctx, cluster, namespace, name) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
}
