package multicluster

import (
	"context"
	"maps"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// publishAllocation keeps the derived Service's allocation annotation (package api/allocation):
// where each cluster's clients send this Service's traffic when its exports prefer the same
// cluster. Every member decides it with the same pure function from the same broker state, so
// each one's agents follow an allocation that agrees with its peers'. It writes only when the
// encoded allocation changes: the previous one is read back from the annotation itself, which
// also carries the hysteresis.
func (r *importReconciler) publishAllocation(ctx context.Context, si *mcsv1beta1.ServiceImport, merged merge.Result, derived *corev1.Service) error {
	if derived == nil {
		return nil
	}
	have := derived.Annotations[allocation.Annotation]
	want := ""
	if merged.PrefersSameCluster() && len(merged.Clusters) > 0 {
		members, err := r.localityMembers(ctx, si, merged.Clusters)
		if err != nil {
			return err
		}
		pub := locality.Decide(members, have, prefersZone(merged.Spec.TrafficDistribution), r.localityOptions())
		want = pub.Annotation
		if want != have {
			log.FromContext(ctx).V(1).Info("cluster allocation changed", "serviceImport", si.Namespace+"/"+si.Name,
				"mode", pub.Result.Mode, "reason", pub.Result.Reason, "spilled", pub.Result.Spilled, "maxLoad", pub.Result.MaxLoad)
		}
	}
	if want == have {
		return nil
	}
	derived.Annotations = maps.Clone(derived.Annotations)
	if want == "" {
		delete(derived.Annotations, allocation.Annotation)
	} else {
		if derived.Annotations == nil {
			derived.Annotations = map[string]string{}
		}
		derived.Annotations[allocation.Annotation] = want
	}
	err := r.local.Update(ctx, derived)
	localWrites.WithLabelValues("service", "update", result(err)).Inc()
	return client.IgnoreNotFound(err)
}

func (r *importReconciler) localityOptions() locality.Options {
	opts := locality.DefaultOptions()
	if t := r.overloadThreshold; t > 0 {
		opts = locality.Options{OverloadThreshold: t, ReturnThreshold: t / 2}
	}
	return opts
}

// prefersZone tells whether the merged trafficDistribution keeps traffic in the client's zone,
// the values the EndpointSlice controller honours with same-zone hints.
func prefersZone(td *string) bool {
	return td != nil && (*td == corev1.ServiceTrafficDistributionPreferSameZone || *td == corev1.ServiceTrafficDistributionPreferClose)
}

// localityMembers gathers the allocation's inputs: every live member is a cluster with clients
// (whether it imports the Service is not published, and a member without the namespace only
// makes the allocation more cautious), with the CPU its Lease publishes and the ready
// endpoints it exports.
func (r *importReconciler) localityMembers(ctx context.Context, si *mcsv1beta1.ServiceImport, exporters []string) ([]locality.Member, error) {
	leases := &coordinationv1.LeaseList{}
	if err := r.broker.List(ctx, leases, client.InNamespace(r.brokerNamespace)); err != nil {
		return nil, err
	}
	byName := map[string]*locality.Member{}
	for i := range leases.Items {
		l, ok := liveness.FromLease(&leases.Items[i], 0)
		if !ok || !r.members.IsLive(l.Cluster) {
			continue
		}
		m := &locality.Member{Name: l.Cluster}
		m.CPU, m.HasCPU = locality.NodeCPUFromAnnotations(leases.Items[i].Annotations)
		byName[l.Cluster] = m
	}
	sources, err := r.importSources(ctx, si, exporters)
	if err != nil {
		return nil, err
	}
	perCluster := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range sources {
		perCluster[s.Cluster] = append(perCluster[s.Cluster], s.Slice)
	}
	for _, c := range exporters {
		if byName[c] == nil {
			byName[c] = &locality.Member{Name: c}
		}
		byName[c].Ready = locality.CountReady(perCluster[c])
	}
	out := make([]locality.Member, 0, len(byName))
	for _, m := range byName {
		out = append(out, *m) // Allocate sorts by name
	}
	return out, nil
}

// demandChanges re-enqueues every ServiceImport when a member's published CPU changes, which
// moves every allocation; renewals that change nothing else are filtered out first.
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

func demandOf(l *coordinationv1.Lease) [2]string {
	if l == nil {
		return [2]string{}
	}
	return [2]string{l.Annotations[allocation.AnnotationWorkerMilliCPU], l.Annotations[allocation.AnnotationZoneMilliCPU]}
}

// importSources returns the source slices of the live exporting clusters: this cluster's own
// local slices, read directly, and the peers' broker copies.
func (r *importReconciler) importSources(ctx context.Context, si *mcsv1beta1.ServiceImport, live []string) ([]sliceplan.Source, error) {
	var sources []sliceplan.Source
	peers := make([]string, 0, len(live))
	for _, c := range live {
		if c == r.self {
			local := &discoveryv1.EndpointSliceList{}
			if err := r.local.List(ctx, local, client.InNamespace(si.Namespace), client.MatchingFields{indexLocalSource: si.Name}); err != nil {
				return nil, err
			}
			sources = append(sources, sliceplan.LocalSources(r.self, sliceplan.SourceSlices(si.Name, local.Items))...)
			continue
		}
		peers = append(peers, c)
	}
	if len(peers) > 0 {
		copies := &discoveryv1.EndpointSliceList{}
		if err := r.broker.List(ctx, copies, client.InNamespace(r.brokerNamespace),
			client.MatchingFields{indexBrokerService: serviceKey(si.Namespace, si.Name)}); err != nil {
			return nil, err
		}
		sources = append(sources, sliceplan.SourcesFromBroker(copies.Items, peers)...)
	}
	return sources, nil
}
