package multicluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// Event reasons on ServiceImports.
const (
	ReasonImportDeleted         = "ServiceImportDeleted"
	ReasonClusterWithdrawn      = importplan.ReasonClusterWithdrawn
	ReasonClusterUnexported     = importplan.ReasonClusterUnexported
	ReasonIPFamilyNotSupported  = "IPFamilyNotSupported"
	ReasonDerivedServiceInvalid = "DerivedServiceInvalid"
	ReasonDerivedRecreated      = "DerivedServiceRecreated"
)

// conflictRetryDelay is how soon a write that lost a race with a newer object is retried.
const conflictRetryDelay = 200 * time.Millisecond

// importReconciler materialises one ServiceImport (by namespace/name) from the broker: it reads
// everything the import depends on (import_read.go), lets importplan.Plan decide every write,
// and applies the plan (import_apply.go).
type importReconciler struct {
	local           client.Client
	broker          client.Client
	brokerNamespace string
	self            string
	members         *membership
	recorder        events.EventRecorder
	locality        locality.Options
	selection       locality.Selection
	// written holds back a reconcile whose cache lacks its own last writes of an import: its
	// imported slices, ServiceImport and derived Service.
	written *writtenSlices
	// leases remembers what each member Lease publishes between syncs.
	leases leaseMembers
}

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceimports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=about.k8s.io,resources=clusterproperties,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

func (r *importReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	err := r.reconcile(ctx, req.NamespacedName)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errStaleCache) {
		// Our cache is behind a write; the newer object's event is on its way.
		log.FromContext(ctx).V(1).Info("retrying after a stale read", "reason", err.Error())
		return reconcile.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	return reconcile.Result{}, err
}

// cacheBehind says whether what a sync read lacks one of this controller's own writes of the
// import: its imported slices, the ServiceImport or the derived Service.
func (r *importReconciler) cacheBehind(key types.NamespacedName, in importplan.Input) bool {
	var si, derived metav1.Object
	if in.Import != nil {
		si = in.Import
	}
	if in.Derived != nil {
		derived = in.Derived
	}
	// Each is asked, so that every write the cache shows is forgotten.
	slicesBehind := r.written.behind(key, in.Imported)
	importBehind := r.written.objectBehind(writtenImport, key, si)
	return r.written.objectBehind(writtenDerived, key, derived) || slicesBehind || importBehind
}

func (r *importReconciler) reconcile(ctx context.Context, key types.NamespacedName) error {
	in, err := r.read(ctx, key)
	if err != nil {
		return fmt.Errorf("reading import %s: %w", key, err)
	}
	plan := importplan.Plan(in)
	if plan.Skip != "" {
		// Nothing is written, so a cache behind this controller's writes cannot mislead it;
		// and the read stopped short of the slices cacheBehind asks about.
		log.FromContext(ctx).V(1).Info("not importing", "serviceImport", key, "reason", plan.Skip)
		return nil
	}
	if r.cacheBehind(key, in) {
		return errStaleCache
	}
	if plan.Allocation != nil {
		res := plan.Allocation.Result
		log.FromContext(ctx).V(1).Info("cluster allocation changed", "serviceImport", key,
			"mode", res.Mode, "reason", res.Reason, "spilled", res.Spilled, "maxLoad", res.MaxLoad)
	}
	w := importWriter{c: r.local, recorder: r.recorder, written: r.written, owner: key}
	if plan.Teardown != nil {
		return w.teardown(ctx, key, plan.Teardown)
	}
	return w.apply(ctx, in.Import, plan)
}
