package multicluster

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/controllers/slicewrite"
)

// ensureDerived keeps the derived ClusterIP Service of a ClusterSetIP import (and removes it
// from a Headless one). Problems the API reports about the Service itself are recorded in
// readiness rather than retried: only a change of the import can fix them.
func (r *importReconciler) ensureDerived(ctx context.Context, si *mcsv1beta1.ServiceImport, spec mcsv1beta1.ServiceImportSpec, existing *corev1.Service, readiness *importplan.Readiness) (*corev1.Service, error) {
	owner := ownerOf(si)
	if existing != nil && (spec.Type != mcsv1beta1.ClusterSetIP || importplan.NeedsRecreate(existing, spec.IPFamilies)) {
		err := client.IgnoreNotFound(r.local.Delete(ctx, existing, client.Preconditions{UID: &existing.UID}))
		localWrites.WithLabelValues("service", "delete", result(err)).Inc()
		if err != nil {
			return nil, err
		}
		if spec.Type != mcsv1beta1.ClusterSetIP {
			return nil, nil
		}
		r.recorder.Eventf(si, existing, corev1.EventTypeNormal, ReasonDerivedRecreated, "Derive",
			"The import's IP families changed to %v: recreating the derived Service, which changes the ClusterSetIP", spec.IPFamilies)
		existing = nil
	}
	if spec.Type != mcsv1beta1.ClusterSetIP {
		return nil, nil
	}
	if existing != nil {
		if !importplan.UpdateDerived(existing, si.Name, spec, owner) {
			return existing, nil
		}
		err := r.local.Update(ctx, existing)
		localWrites.WithLabelValues("service", "update", result(err)).Inc()
		if apierrors.IsInvalid(err) {
			readiness.ServiceProblem = err.Error()
			r.recorder.Eventf(si, existing, corev1.EventTypeWarning, ReasonDerivedServiceInvalid, "Derive", "Updating the derived Service failed: %v", err)
			return existing, nil
		}
		return existing, err
	}
	var familyErrors []string
	for _, attempt := range importplan.FamilyAttempts(spec.IPFamilies) {
		svc := importplan.DerivedService(si.Namespace, si.Name, spec, owner, attempt)
		err := r.local.Create(ctx, svc)
		localWrites.WithLabelValues("service", "create", result(err)).Inc()
		switch {
		case err == nil:
			return svc, nil
		case apierrors.IsInvalid(err) && importplan.IsFamilyRejection(err.Error()):
			familyErrors = append(familyErrors, err.Error())
			continue
		case apierrors.IsInvalid(err):
			readiness.ServiceProblem = err.Error()
			r.recorder.Eventf(si, nil, corev1.EventTypeWarning, ReasonDerivedServiceInvalid, "Derive", "Creating the derived Service failed: %v", err)
			return nil, nil
		default:
			return nil, err
		}
	}
	readiness.FamilyProblem = familyErrors[len(familyErrors)-1]
	r.recorder.Eventf(si, nil, corev1.EventTypeWarning, ReasonIPFamilyNotSupported, "Derive",
		"This cluster serves none of the import's IP families %v", spec.IPFamilies)
	return nil, nil
}

// syncSlices writes one imported slice per source slice of the live exporting clusters: the
// broker copies of peers and this cluster's own local slices, read directly so that local
// endpoints do not wait for a round trip through the broker. It reports whether any imported
// slice exists afterwards.
func (r *importReconciler) syncSlices(ctx context.Context, si *mcsv1beta1.ServiceImport, importType mcsv1beta1.ServiceImportType, live []string) (bool, error) {
	sources, err := r.importSources(ctx, si, live)
	if err != nil {
		return false, err
	}
	owner := ownerOf(si)
	target := sliceplan.Target{Namespace: si.Namespace, Service: si.Name, Owner: &owner}
	if importType == mcsv1beta1.ClusterSetIP {
		target.DerivedService = names.DerivedServiceName(si.Namespace, si.Name)
	}
	desired := sliceplan.Imported(target, sources)
	existing := &discoveryv1.EndpointSliceList{}
	if err := r.local.List(ctx, existing, client.InNamespace(si.Namespace), client.MatchingFields{indexLocalImported: si.Name}); err != nil {
		return false, err
	}
	if err := r.applyLocalSlices(ctx, sliceplan.Plan(desired, existing.Items)); err != nil {
		return false, err
	}
	return len(desired) > 0, nil
}

// applyLocalSlices writes the imported slices of one ServiceImport. Each write is counted
// once its outcome is known; an imported-slice change only when it landed.
func (r *importReconciler) applyLocalSlices(ctx context.Context, changes sliceplan.Changes) error {
	return slicewrite.Apply(ctx, r.local, slicewrite.Changes[*discoveryv1.EndpointSlice](changes),
		func(op slicewrite.Op, _ *discoveryv1.EndpointSlice, _ time.Duration, err error) {
			localWrites.WithLabelValues("endpointslice", string(op), result(err)).Inc()
			if err == nil {
				importedEndpointSlices.WithLabelValues(string(op)).Inc()
			}
		})
}

// ownRecordExists tells whether this cluster exports namespace/name, as the broker cache knows.
// A failed read is logged and answered no: the export's own events requeue the import.
func (r *importReconciler) ownRecordExists(ctx context.Context, namespace, name string) bool {
	record := &v1alpha1.ServiceExportRecord{}
	err := r.broker.Get(ctx, client.ObjectKey{Namespace: r.brokerNamespace, Name: names.RecordName(r.self, namespace, name)}, record)
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "reading this cluster's broker record", "service", namespace+"/"+name)
	}
	return err == nil
}
