package multicluster

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// Event reasons on ServiceImports.
const (
	ReasonImportDeleted         = "ServiceImportDeleted"
	ReasonClusterWithdrawn      = "ClusterWithdrawn"
	ReasonClusterUnexported     = "ClusterUnexported"
	ReasonIPFamilyNotSupported  = "IPFamilyNotSupported"
	ReasonDerivedServiceInvalid = "DerivedServiceInvalid"
	ReasonDerivedRecreated      = "DerivedServiceRecreated"
)

// conflictRetryDelay is how soon a write that lost a race with a newer object is retried.
const conflictRetryDelay = 200 * time.Millisecond

// importReconciler materialises one ServiceImport (by namespace/name) from the broker.
type importReconciler struct {
	local           client.Client
	broker          client.Client
	brokerNamespace string
	self            string
	members         *membership
	recorder        events.EventRecorder
	// overloadThreshold bounds the cluster allocation (import_locality.go); 0: the default.
	overloadThreshold float64
}

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=about.k8s.io,resources=clusterproperties,verbs=get;list;watch

func (r *importReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req.NamespacedName)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// Our cache is behind a write; the newer object's event is on its way.
		return reconcile.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	return res, err
}

func (r *importReconciler) reconcile(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	records, err := r.records(ctx, key)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(records) == 0 {
		return reconcile.Result{}, r.teardown(ctx, key)
	}
	namespace := &corev1.Namespace{}
	if err := r.local.Get(ctx, client.ObjectKey{Name: key.Namespace}, namespace); err != nil {
		// Namespace sameness: a member without the namespace does not import, and never
		// creates it.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if namespace.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}

	var live []merge.Record
	for _, rec := range records {
		if r.members.IsLive(rec.ClusterID) {
			live = append(live, rec)
		}
	}
	merged := merge.Merge(live)
	if len(live) == 0 {
		// Every exporter has lost its lease. Keep the ServiceImport and its ClusterSetIP
		// stable (from all records) so that clients recover as soon as one comes back, but
		// import no endpoints.
		merged = merge.Merge(records)
		merged.Clusters = nil
	}

	derived := &corev1.Service{}
	derivedKey := client.ObjectKey{Namespace: key.Namespace, Name: names.DerivedServiceName(key.Namespace, key.Name)}
	if err := r.local.Get(ctx, derivedKey, derived); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		derived = nil
	}
	si, err := r.ensureServiceImport(ctx, key, merged, importplan.ClusterSetIPs(derived))
	if err != nil || si == nil {
		return reconcile.Result{}, err
	}
	readiness := importplan.Readiness{Type: merged.Spec.Type, LiveClusters: len(merged.Clusters)}
	derived, err = r.ensureDerived(ctx, si, merged.Spec, derived, &readiness)
	if err != nil {
		return reconcile.Result{}, err
	}
	readiness.IPs = importplan.ClusterSetIPs(derived)

	present, err := r.syncSlices(ctx, si, merged.Spec.Type, merged.Clusters)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.publishAllocation(ctx, si, merged, derived); err != nil {
		return reconcile.Result{}, err
	}

	if want := importplan.Spec(merged.Spec, readiness.IPs); !equality.Semantic.DeepEqual(si.Spec, want) {
		si.Spec = want
		err := r.local.Update(ctx, si)
		localWrites.WithLabelValues("serviceimport", "update", result(err)).Inc()
		if err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	status, changed := importplan.Status(si.Status, merged.Clusters, present, importplan.ReadyCondition(readiness, si.Generation))
	if changed {
		before := statusClusters(si)
		si.Status = status
		err := r.local.Status().Update(ctx, si)
		localWrites.WithLabelValues("serviceimport-status", "update", result(err)).Inc()
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: conflictRetryDelay}, nil
		}
		if err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		r.announceClusters(si, before, merged.Clusters, records)
	}
	return reconcile.Result{}, nil
}

// records returns the broker records of one exported Service, skipping any whose spec does not
// match its labels.
func (r *importReconciler) records(ctx context.Context, key types.NamespacedName) ([]merge.Record, error) {
	list := &v1alpha1.ServiceExportRecordList{}
	if err := r.broker.List(ctx, list, client.InNamespace(r.brokerNamespace),
		client.MatchingFields{indexBrokerService: serviceKey(key.Namespace, key.Name)}); err != nil {
		return nil, err
	}
	out := make([]merge.Record, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil && trustworthy(&list.Items[i]) {
			out = append(out, list.Items[i].Spec)
		}
	}
	return out, nil
}

// ensureServiceImport creates the ServiceImport or brings its labels and annotations up to date.
// A created import gets no event: an import appearing is what exporting asks for, and at one
// event per import per member it was a fifth of a bulk start's writes (events stay for the
// transitions a user acts on: withdrawals, conflicts, failures).
func (r *importReconciler) ensureServiceImport(ctx context.Context, key types.NamespacedName, merged merge.Result, ips []string) (*mcsv1beta1.ServiceImport, error) {
	si := &mcsv1beta1.ServiceImport{}
	err := r.local.Get(ctx, key, si)
	if apierrors.IsNotFound(err) {
		si = &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: merged.Labels, Annotations: merged.Annotations},
			Spec:       importplan.Spec(merged.Spec, ips),
		}
		err := r.local.Create(ctx, si)
		localWrites.WithLabelValues("serviceimport", "create", result(err)).Inc()
		if err != nil {
			return nil, err
		}
		return si, nil
	}
	if err != nil {
		return nil, err
	}
	if si.DeletionTimestamp != nil {
		// Its deletion's event brings us back once it is gone.
		return nil, nil
	}
	// Only the exported labels and annotations belong on a ServiceImport.
	if !equality.Semantic.DeepEqual(si.Labels, merged.Labels) || !equality.Semantic.DeepEqual(si.Annotations, merged.Annotations) {
		si.Labels, si.Annotations = merged.Labels, merged.Annotations
		err := r.local.Update(ctx, si)
		localWrites.WithLabelValues("serviceimport", "update", result(err)).Inc()
		if err != nil {
			return nil, err
		}
	}
	return si, nil
}

// ownerOf references the ServiceImport as the controller of what is derived from it.
func ownerOf(si *mcsv1beta1.ServiceImport) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: mcsv1beta1.GroupVersion.String(),
		Kind:       mcsv1beta1.ServiceImportKindName,
		Name:       si.Name,
		UID:        si.UID,
		Controller: ptr.To(true),
	}
}

// announceClusters emits one event per kind of loss among the import's exporting clusters
// (withdrawn: its Lease lapsed; unexported), each naming every cluster concerned. A cluster
// joining the import gets none, as a created import gets none: the status names it, and at ten
// members starting together an event per arrival was the bulk of a member's writes. Called once
// the status without the lost clusters is written, so that a retried write announces nothing
// twice.
func (r *importReconciler) announceClusters(si *mcsv1beta1.ServiceImport, before, live []string, records []merge.Record) {
	var withdrawn, unexported []string
	for _, c := range before {
		switch {
		case slices.Contains(live, c):
		case slices.ContainsFunc(records, func(rec merge.Record) bool { return rec.ClusterID == c }):
			withdrawn = append(withdrawn, c)
		default:
			unexported = append(unexported, c)
		}
	}
	if len(withdrawn) > 0 {
		r.recorder.Eventf(si, nil, corev1.EventTypeWarning, ReasonClusterWithdrawn, "Withdraw",
			"The Lease in the broker of %s has lapsed: endpoints withdrawn until it is renewed", clusterNames(withdrawn))
	}
	if len(unexported) > 0 {
		r.recorder.Eventf(si, nil, corev1.EventTypeNormal, ReasonClusterUnexported, "Withdraw", "No longer exported by %s", clusterNames(unexported))
	}
}

// clusterNames reads "cluster a" or "clusters a, b".
func clusterNames(ids []string) string {
	if len(ids) == 1 {
		return "cluster " + ids[0]
	}
	return "clusters " + strings.Join(ids, ", ")
}

func statusClusters(si *mcsv1beta1.ServiceImport) []string {
	out := make([]string, 0, len(si.Status.Clusters))
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

// teardown removes the ServiceImport of a Service no cluster exports any more, with its
// derived Service and imported slices. Owner references would let the garbage collector do
// this too, but not as promptly, and not in clusters without one.
func (r *importReconciler) teardown(ctx context.Context, key types.NamespacedName) error {
	imported := &discoveryv1.EndpointSliceList{}
	if err := r.local.List(ctx, imported, client.InNamespace(key.Namespace), client.MatchingFields{indexLocalImported: key.Name}); err != nil {
		return err
	}
	if err := r.applyLocalSlices(ctx, sliceplan.Plan(nil, imported.Items)); err != nil {
		return err
	}
	derived := &corev1.Service{}
	err := r.local.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: names.DerivedServiceName(key.Namespace, key.Name)}, derived)
	if err == nil && derived.Labels[mcsv1beta1.LabelServiceName] == key.Name {
		err = client.IgnoreNotFound(r.local.Delete(ctx, derived, client.Preconditions{UID: &derived.UID}))
		localWrites.WithLabelValues("service", "delete", result(err)).Inc()
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	si := &mcsv1beta1.ServiceImport{}
	if err := r.local.Get(ctx, key, si); err != nil {
		return client.IgnoreNotFound(err)
	}
	if si.DeletionTimestamp != nil {
		return nil
	}
	r.recorder.Eventf(si, nil, corev1.EventTypeNormal, ReasonImportDeleted, "Unimport", "No cluster exports %s any more", key)
	err = client.IgnoreNotFound(r.local.Delete(ctx, si, client.Preconditions{UID: &si.UID}))
	localWrites.WithLabelValues("serviceimport", "delete", result(err)).Inc()
	if err == nil {
		log.FromContext(ctx).Info("deleted the ServiceImport: the last export is gone", "serviceImport", key)
	}
	return err
}
