package multicluster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/controllers/slicewrite"
)

// Event reasons on ServiceExports.
const (
	ReasonExportInvalid    = "ExportInvalid"
	ReasonExportWithdrawn  = "ExportWithdrawn"
	ReasonExportConflict   = "ExportConflict"
	ReasonConflictResolved = "ConflictResolved"
	ReasonBrokerWriteError = "BrokerWriteFailed"
)

// exportReconciler publishes one ServiceExport (by namespace/name) to the broker and keeps its
// Valid, Ready and Conflict conditions.
type exportReconciler struct {
	local           client.Client // member cluster, cached reads
	broker          client.Client // broker, cached reads
	brokerNamespace string
	self            string
	members         *membership
	recorder        events.EventRecorder
	leaving         *atomic.Bool
	writeTimeout    time.Duration
	// first, when set, counts down the exports of this member's first publication.
	first *firstExports
	// written holds back a reconcile whose broker cache lacks its own last copy writes.
	written *writtenSlices
	// outage is the member's view of the broker's reachability; a transient failure is
	// retried without a word on the export until the outage has lasted outageGrace.
	outage      *brokerOutage
	outageGrace time.Duration
	// refusalGrace is how long refusals of this export's publication may last, while the broker
	// otherwise answers, before the export reports them (brokerRefusalGrace).
	refusalGrace time.Duration
}

// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports,verbs=get;list;watch
// +kubebuilder:rbac:groups=multicluster.x-k8s.io,resources=serviceexports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *exportReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if r.first != nil {
		r.first.awaitFirstRenewal(ctx)
	}
	res, published, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errStaleCache) {
		// Our cache is behind a write; the newer object's event is on its way.
		return reconcile.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	if err == nil && r.first != nil {
		r.first.reconciled(req.NamespacedName, published)
	}
	return res, err
}

// reconcile publishes one export; published says that its record is in the broker.
func (r *exportReconciler) reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, published bool, err error) {
	logger := log.FromContext(ctx)
	if r.leaving.Load() {
		return reconcile.Result{}, false, nil
	}
	export := &mcsv1beta1.ServiceExport{}
	if err := r.local.Get(ctx, req.NamespacedName, export); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, false, err
		}
		withdrawn, err := r.withdraw(ctx, req.NamespacedName)
		if withdrawn {
			logger.Info("withdrew an unexported Service from the broker", "service", req.NamespacedName)
		}
		return reconcile.Result{}, false, err
	}
	if export.DeletionTimestamp != nil {
		_, err := r.withdraw(ctx, req.NamespacedName)
		return reconcile.Result{}, false, err
	}

	service := &corev1.Service{}
	if err := r.local.Get(ctx, req.NamespacedName, service); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, false, err
		}
		service = nil
	}
	record, err := merge.RecordFromService(r.self, export, service)
	var invalid *merge.ExportError
	if errors.As(err, &invalid) {
		return reconcile.Result{}, false, r.handleInvalid(ctx, export, invalid)
	}
	if err != nil {
		return reconcile.Result{}, false, err
	}

	err = r.publish(ctx, record)
	if err != nil && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || errors.Is(err, errStaleCache)) {
		return reconcile.Result{}, false, err
	}
	if r.outage != nil {
		lasted := r.outage.published(req.NamespacedName, err)
		grace := r.refusalGrace
		if transient(err) || r.outage.lasted() > 0 {
			grace = r.outageGrace
		}
		if err != nil && lasted < grace {
			// A broker outage is one fact of the whole member, not of this export: the renewer
			// logs it once and the broker_reachable metric shows it. The export keeps its
			// conditions (its last publication is still in the broker) and the change is
			// retried with back-off until the failure has lasted its grace.
			logger.V(1).Info("publishing to the broker failed; retrying", "failingFor", lasted, "reason", err.Error())
			return reconcile.Result{}, false, err
		}
	}
	if err != nil {
		return reconcile.Result{}, false, r.reportPublishFailure(ctx, export, err)
	}

	conflict := r.conflictOf(ctx, record)
	status := export.Status.DeepCopy()
	setValid(status, export.Generation, nil)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionTrue,
		Reason:             string(mcsv1beta1.ServiceExportReasonExported),
		Message:            "Published to the ClusterSet's broker as cluster " + r.self,
		ObservedGeneration: export.Generation,
	})
	cond := conflict.Condition()
	cond.ObservedGeneration = export.Generation
	meta.SetStatusCondition(&status.Conditions, cond)
	return reconcile.Result{}, true, r.writeStatus(ctx, export, status)
}

// reportPublishFailure says on the export, once per generation, that its publication failed
// and is being retried: a Pending Ready condition and a warning event. It returns err, so the
// failure is retried with back-off.
func (r *exportReconciler) reportPublishFailure(ctx context.Context, export *mcsv1beta1.ServiceExport, err error) error {
	logger := log.FromContext(ctx)
	if c := meta.FindStatusCondition(export.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady)); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == string(mcsv1beta1.ServiceExportReasonPending) && c.ObservedGeneration == export.Generation {
		// Said already: a retry that fails again writes no status and no event.
		return err
	}
	status := export.Status.DeepCopy()
	setValid(status, export.Generation, nil)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionFalse,
		Reason:             string(mcsv1beta1.ServiceExportReasonPending),
		Message:            "Publishing to the broker failed, retrying: " + err.Error(),
		ObservedGeneration: export.Generation,
	})
	if statusErr := r.writeStatus(ctx, export, status); statusErr != nil {
		logger.Error(statusErr, "recording a failed publication")
	}
	r.recorder.Eventf(export, nil, corev1.EventTypeWarning, ReasonBrokerWriteError, "Publish", "Publishing to the broker failed: %v", err)
	return err
}

// conflictOf merges this export's record with the live peers' records of the same Service.
// The own record is the one just published, not the cached one, which may lag behind.
func (r *exportReconciler) conflictOf(ctx context.Context, own merge.Record) merge.ClusterConflict {
	records := &v1alpha1.ServiceExportRecordList{}
	if err := r.broker.List(ctx, records, client.InNamespace(r.brokerNamespace),
		client.MatchingFields{indexTrustedRecord: serviceKey(own.ServiceNamespace, own.ServiceName)}, readOnly); err != nil {
		log.FromContext(ctx).Error(err, "listing peer records; judging conflicts on this export alone")
	}
	specs := []merge.Record{own}
	for i := range records.Items {
		spec := records.Items[i].Spec
		if spec.ClusterID == r.self || !r.members.IsLive(spec.ClusterID) {
			continue
		}
		specs = append(specs, spec)
	}
	conflict, _ := merge.Merge(specs).ConflictFor(r.self)
	return conflict
}

// trustworthy rejects a record whose spec speaks for another cluster or Service than its
// labels say. The broker's admission policy refuses such writes; this guards brokers that
// were set up without it. It also rejects a record whose exported labels or annotations no
// ServiceImport could carry (members refuse to publish one, older members did not): merged in,
// they would fail every member's ServiceImport write and so stop the whole import. Cluster
// selectors that do not validate are refused for the same reason: members refuse to publish
// them, and a record carrying them was not written by a member of this version.
func trustworthy(record *v1alpha1.ServiceExportRecord) bool {
	ns, name, ok := brokerServiceOf(record)
	return ok && record.Spec.ClusterID == record.Labels[v1alpha1.LabelSourceCluster] &&
		record.Spec.ServiceNamespace == ns && record.Spec.ServiceName == name &&
		merge.ValidateExportedMetadata(record.Spec.ExportedLabels, record.Spec.ExportedAnnotations) == nil &&
		clusterselect.Validate(record.Spec.ClusterSelectors) == nil
}

func (r *exportReconciler) handleInvalid(ctx context.Context, export *mcsv1beta1.ServiceExport, invalid *merge.ExportError) error {
	key := types.NamespacedName{Namespace: export.Namespace, Name: export.Name}
	withdrawn, err := r.withdraw(ctx, key)
	if err != nil {
		return err
	}
	if withdrawn {
		r.recorder.Eventf(export, nil, corev1.EventTypeNormal, ReasonExportWithdrawn, "Withdraw",
			"Withdrew the export from the broker: %s", invalid.Message)
	}
	status := export.Status.DeepCopy()
	setValid(status, export.Generation, invalid)
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionFalse,
		Reason:             string(mcsv1beta1.ServiceExportReasonFailed),
		Message:            "Not exported: " + invalid.Message,
		ObservedGeneration: export.Generation,
	})
	// An invalid export takes no part in the merge, so it cannot be in conflict either.
	meta.RemoveStatusCondition(&status.Conditions, string(mcsv1beta1.ServiceExportConditionConflict))
	return r.writeStatus(ctx, export, status)
}

func setValid(status *mcsv1beta1.ServiceExportStatus, generation int64, invalid *merge.ExportError) {
	cond := metav1.Condition{
		Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceExportReasonValid), Message: "The Service can be exported",
		ObservedGeneration: generation,
	}
	if invalid != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, string(invalid.Reason), invalid.Message
	}
	meta.SetStatusCondition(&status.Conditions, cond)
}

// announceTransitions emits an event for each condition change a user would want to see.
func (r *exportReconciler) announceTransitions(export *mcsv1beta1.ServiceExport, next *mcsv1beta1.ServiceExportStatus) {
	prev := export.Status.Conditions
	changed := func(t mcsv1beta1.ServiceExportConditionType) (*metav1.Condition, bool) {
		now := meta.FindStatusCondition(next.Conditions, string(t))
		before := meta.FindStatusCondition(prev, string(t))
		if now == nil {
			return nil, false
		}
		return now, before == nil || before.Status != now.Status || before.Reason != now.Reason
	}
	if c, ok := changed(mcsv1beta1.ServiceExportConditionValid); ok && c.Status == metav1.ConditionFalse {
		r.recorder.Eventf(export, nil, corev1.EventTypeWarning, ReasonExportInvalid, "Validate", "%s: %s", c.Reason, c.Message)
	}
	if c, ok := changed(mcsv1beta1.ServiceExportConditionConflict); ok {
		if c.Status == metav1.ConditionTrue {
			r.recorder.Eventf(export, nil, corev1.EventTypeWarning, ReasonExportConflict, "Merge", "%s: %s", c.Reason, c.Message)
		} else if before := meta.FindStatusCondition(prev, string(mcsv1beta1.ServiceExportConditionConflict)); before != nil && before.Status == metav1.ConditionTrue {
			r.recorder.Eventf(export, nil, corev1.EventTypeNormal, ReasonConflictResolved, "Merge", "%s", c.Message)
		}
	}
}

// writeStatus writes the export's status if it changed, and only once the write has landed
// announces its transitions: a reconcile that read a stale export from the cache sees the old
// conditions and would announce a transition already announced, but its write conflicts.
func (r *exportReconciler) writeStatus(ctx context.Context, export *mcsv1beta1.ServiceExport, status *mcsv1beta1.ServiceExportStatus) error {
	key := client.ObjectKeyFromObject(export)
	if r.written.objectBehind(writtenExportStatus, key, export) {
		// The cache shows the export from before this controller's last status write, which
		// would be refused with 409 (half of a bulk start's exports, reconciled again by their
		// own copies' events, were); the written export's event requeues us.
		return nil
	}
	if equality.Semantic.DeepEqual(&export.Status, status) {
		return nil
	}
	updated := export.DeepCopy()
	updated.Status = *status
	err := r.local.Status().Update(ctx, updated)
	localWrites.WithLabelValues("serviceexport-status", "update", result(err)).Inc()
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// A newer export (or none) is on its way through the cache; its event requeues us.
		return nil
	}
	if err != nil {
		return err
	}
	r.written.objectWritten(writtenExportStatus, key, slicewrite.Update, export.ResourceVersion, "")
	r.announceTransitions(export, status)
	return nil
}

// publish writes the Service's slice copies and then its record, so that members who see the
// record find the endpoints already there.
func (r *exportReconciler) publish(ctx context.Context, record merge.Record) error {
	ctx, cancel := context.WithTimeout(ctx, r.writeTimeout)
	defer cancel()
	local := &discoveryv1.EndpointSliceList{}
	if err := r.local.List(ctx, local, client.InNamespace(record.ServiceNamespace),
		client.MatchingFields{indexLocalSource: record.ServiceName}, readOnly); err != nil {
		return err
	}
	sources := sliceplan.SourceSlices(record.ServiceName, local.Items)
	desired := sliceplan.BrokerCopies(r.self, r.brokerNamespace, record.ServiceNamespace, record.ServiceName, sources)
	existing, err := r.ownCopies(ctx, record.ServiceNamespace, record.ServiceName)
	if err != nil {
		return err
	}
	want := &v1alpha1.ServiceExportRecord{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: r.brokerNamespace,
			Name:      names.RecordName(r.self, record.ServiceNamespace, record.ServiceName),
			Labels:    names.RecordLabels(r.self, record.ServiceNamespace, record.ServiceName),
		},
		Spec: record,
	}
	have, err := r.cachedRecord(ctx, client.ObjectKeyFromObject(want))
	if err != nil {
		return err
	}
	owner := types.NamespacedName{Namespace: record.ServiceNamespace, Name: record.ServiceName}
	if r.written.behind(owner, existing) || r.written.recordBehind(owner, have) {
		return errStaleCache
	}
	if err := r.applyBrokerSlices(ctx, owner, sliceplan.Plan(desired, existing)); err != nil {
		return err
	}

	switch {
	case have == nil:
		err = r.broker.Create(ctx, want)
		brokerWrites.WithLabelValues("record", "create", result(err)).Inc()
		if err == nil {
			r.written.objectWritten(writtenRecord, owner, slicewrite.Create, "", "")
		}
		return err
	case equality.Semantic.DeepEqual(have.Spec, want.Spec) && equality.Semantic.DeepEqual(have.Labels, want.Labels):
		return nil
	}
	want.ResourceVersion = have.ResourceVersion
	err = r.broker.Update(ctx, want)
	brokerWrites.WithLabelValues("record", "update", result(err)).Inc()
	if err == nil {
		r.written.objectWritten(writtenRecord, owner, slicewrite.Update, have.ResourceVersion, "")
	}
	return err
}

// cachedRecord is this cluster's broker record under key as the broker cache shows it; nil
// when there is none.
func (r *exportReconciler) cachedRecord(ctx context.Context, key client.ObjectKey) (*v1alpha1.ServiceExportRecord, error) {
	record := &v1alpha1.ServiceExportRecord{}
	err := r.broker.Get(ctx, key, record)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return record, nil
}

func (r *exportReconciler) ownCopies(ctx context.Context, namespace, name string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	// The index narrows the list to this Service's copies of every member (a label selector alone
	// walks the whole broker cache, which made each export reconcile cost O(ClusterSet)).
	err := r.broker.List(ctx, list, client.InNamespace(r.brokerNamespace),
		client.MatchingFields{indexBrokerService: serviceKey(namespace, name)}, client.MatchingLabels(names.RecordLabels(r.self, namespace, name)), readOnly)
	return list.Items, err
}

// applyBrokerSlices writes this cluster's slice copies of the Service owner in the broker,
// counting each write once its outcome is known and remembering those that landed.
func (r *exportReconciler) applyBrokerSlices(ctx context.Context, owner types.NamespacedName, changes sliceplan.Changes) error {
	return r.written.apply(owner, changes, func(changes sliceplan.Changes, landed slicewrite.Observer[*discoveryv1.EndpointSlice]) error {
		return slicewrite.Apply(ctx, r.broker, slicewrite.Changes[*discoveryv1.EndpointSlice](changes),
			func(op slicewrite.Op, s *discoveryv1.EndpointSlice, took time.Duration, err error) {
				brokerWrites.WithLabelValues("endpointslice", string(op), result(err)).Inc()
				if landed != nil {
					landed(op, s, took, err)
				}
			})
	})
}

// withdraw deletes this cluster's record and slice copies of a Service from the broker, as far
// as the broker cache knows them, and reports whether there was anything to delete.
func (r *exportReconciler) withdraw(ctx context.Context, key types.NamespacedName) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.writeTimeout)
	defer cancel()
	copies, err := r.ownCopies(ctx, key.Namespace, key.Name)
	if err != nil {
		return false, err
	}
	withdrew := len(copies) > 0
	record, err := r.cachedRecord(ctx, client.ObjectKey{Namespace: r.brokerNamespace, Name: names.RecordName(r.self, key.Namespace, key.Name)})
	if err != nil {
		return withdrew, err
	}
	if r.written.behind(key, copies) || r.written.recordBehind(key, record) {
		return withdrew || record != nil, errStaleCache
	}
	if err := r.applyBrokerSlices(ctx, key, sliceplan.Plan(nil, copies)); err != nil {
		return withdrew, err
	}
	if record == nil {
		return withdrew, nil
	}
	err = r.broker.Delete(ctx, record)
	brokerWrites.WithLabelValues("record", "delete", result(err)).Inc()
	if err == nil {
		r.written.objectWritten(writtenRecord, key, slicewrite.Delete, "", record.UID)
	}
	if err = client.IgnoreNotFound(err); err != nil {
		return true, fmt.Errorf("deleting the broker record of %s: %w", key, err)
	}
	return true, nil
}
