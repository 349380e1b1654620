package multicluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/controllers/slicewrite"
)

// importWriter applies an import's plan: every write goes through do, which counts it and names
// the object and verb in the error, and every event through the recorder. It decides nothing:
// problems the API reports about the derived Service itself are handed to Conclude, since only
// a change of the import can fix them.
type importWriter struct {
	c        client.Client
	recorder events.EventRecorder
	// written remembers the slice writes of the import owner that landed (nil: none).
	written *writtenSlices
	owner   types.NamespacedName
}

// do runs one write of kind/verb on obj and counts it by its outcome. A write of the
// ServiceImport or the derived Service that landed is remembered, so that a sync reading a
// cache without it writes nothing (it would be refused with 409 or AlreadyExists).
func (w importWriter) do(kind, verb string, obj client.Object, write func() error) error {
	replaced, uid := obj.GetResourceVersion(), obj.GetUID()
	err := write()
	localWrites.WithLabelValues(kind, verb, result(err)).Inc()
	if err != nil {
		return fmt.Errorf("%s %s %s: %w", verb, kind, client.ObjectKeyFromObject(obj), err)
	}
	if remembered, ok := importObjectKinds[kind]; ok {
		w.written.objectWritten(remembered, w.owner, slicewrite.Op(verb), replaced, uid)
	}
	return nil
}

// importObjectKinds are the kinds do writes whose writes writtenSlices remembers, by the kind
// it remembers them as.
var importObjectKinds = map[string]string{"serviceimport": writtenImport, "serviceimport-status": writtenImport, "service": writtenDerived}

// apply writes the derived Service first, so that a ServiceImport it creates carries the
// Service's IPs from the start; then the ServiceImport, its slices and its status.
func (w importWriter) apply(ctx context.Context, existing *mcsv1beta1.ServiceImport, plan importplan.Sync) error {
	regarding := existing // what the derived Service's events name
	if plan.CreateImport != nil {
		regarding = plan.CreateImport
	}
	outcome, err := w.writeDerived(ctx, regarding, plan.Derived)
	if err != nil {
		return err
	}
	si, err := w.writeImport(ctx, existing, plan, outcome)
	if err != nil {
		return err
	}
	for _, s := range plan.Slices.Create {
		importplan.BindOwner(s, si)
	}
	for _, s := range plan.Slices.Update {
		importplan.BindOwner(s, si)
	}
	if err := w.writeSlices(ctx, plan.Slices); err != nil {
		return err
	}
	return w.conclude(ctx, si, plan, outcome)
}

// writeImport creates the ServiceImport, with the spec the derived Service's outcome gives it,
// or updates its labels and annotations, and returns it as the API server now has it. A
// created import gets no event: an import appearing is what exporting asks for, and at one
// event per import per member it was a fifth of a bulk start's writes (events stay for the
// transitions a user acts on: withdrawals, conflicts, failures).
func (w importWriter) writeImport(ctx context.Context, existing *mcsv1beta1.ServiceImport, plan importplan.Sync, out importplan.DerivedOutcome) (*mcsv1beta1.ServiceImport, error) {
	switch {
	case plan.CreateImport != nil:
		si := plan.CreateImport.DeepCopy()
		if spec := plan.ImportSpec(si, out); spec != nil {
			si.Spec = *spec
		}
		return si, w.do("serviceimport", "create", si, func() error { return w.c.Create(ctx, si) })
	case plan.UpdateImport != nil:
		si := plan.UpdateImport.DeepCopy()
		return si, w.do("serviceimport", "update", si, func() error { return w.c.Update(ctx, si) })
	}
	return existing, nil
}

// writeDerived deletes, creates or updates the derived Service as planned and reports how it
// ended.
func (w importWriter) writeDerived(ctx context.Context, si *mcsv1beta1.ServiceImport, plan importplan.DerivedPlan) (importplan.DerivedOutcome, error) {
	if old := plan.Delete; old != nil {
		err := w.do("service", "delete", old, func() error {
			return client.IgnoreNotFound(w.c.Delete(ctx, old, client.Preconditions{UID: &old.UID}))
		})
		if err != nil {
			return importplan.DerivedOutcome{}, err
		}
		if plan.Recreate {
			w.recorder.Eventf(si, old, corev1.EventTypeNormal, ReasonDerivedRecreated, "Derive",
				"The import's IP families changed to %v: recreating the derived Service, which changes the ClusterSetIP", si.Spec.IPFamilies)
		}
	}
	switch {
	case plan.Update != nil:
		return w.updateDerived(ctx, si, plan.Update)
	case len(plan.Create) > 0:
		return w.createDerived(ctx, si, plan.Create)
	}
	return importplan.DerivedOutcome{Service: plan.Keep}, nil
}

func (w importWriter) updateDerived(ctx context.Context, si *mcsv1beta1.ServiceImport, svc *corev1.Service) (importplan.DerivedOutcome, error) {
	svc = svc.DeepCopy()
	err := w.do("service", "update", svc, func() error { return w.c.Update(ctx, svc) })
	if apierrors.IsInvalid(err) {
		w.recorder.Eventf(si, svc, corev1.EventTypeWarning, ReasonDerivedServiceInvalid, "Derive", "Updating the derived Service failed: %v", err)
		return importplan.DerivedOutcome{Service: svc, ServiceProblem: err.Error()}, nil
	}
	return importplan.DerivedOutcome{Service: svc}, client.IgnoreNotFound(err)
}

// createDerived tries each way of asking for the import's IP families in turn.
func (w importWriter) createDerived(ctx context.Context, si *mcsv1beta1.ServiceImport, attempts []*corev1.Service) (importplan.DerivedOutcome, error) {
	var familyErrors []string
	for _, attempt := range attempts {
		svc := attempt.DeepCopy()
		err := w.c.Create(ctx, svc)
		localWrites.WithLabelValues("service", "create", result(err)).Inc()
		switch {
		case err == nil:
			w.written.objectWritten(writtenDerived, w.owner, slicewrite.Create, "", "")
			return importplan.DerivedOutcome{Service: svc}, nil
		case apierrors.IsInvalid(err) && importplan.IsFamilyRejection(err.Error()):
			familyErrors = append(familyErrors, err.Error())
		case apierrors.IsInvalid(err):
			w.recorder.Eventf(si, nil, corev1.EventTypeWarning, ReasonDerivedServiceInvalid, "Derive", "Creating the derived Service failed: %v", err)
			return importplan.DerivedOutcome{ServiceProblem: err.Error()}, nil
		default:
			return importplan.DerivedOutcome{}, fmt.Errorf("create service %s: %w", client.ObjectKeyFromObject(svc), err)
		}
	}
	w.recorder.Eventf(si, nil, corev1.EventTypeWarning, ReasonIPFamilyNotSupported, "Derive",
		"This cluster serves none of the import's IP families %v", si.Spec.IPFamilies)
	return importplan.DerivedOutcome{FamilyProblem: familyErrors[len(familyErrors)-1]}, nil
}

// writeSlices writes the imported slices of one ServiceImport. Each write is counted once its
// outcome is known; an imported-slice change only when it landed.
func (w importWriter) writeSlices(ctx context.Context, changes sliceplan.Changes) error {
	return w.written.apply(w.owner, changes, func(changes sliceplan.Changes, landed slicewrite.Observer[*discoveryv1.EndpointSlice]) error {
		return slicewrite.Apply(ctx, w.c, slicewrite.Changes[*discoveryv1.EndpointSlice](changes),
			func(op slicewrite.Op, s *discoveryv1.EndpointSlice, took time.Duration, err error) {
				localWrites.WithLabelValues("endpointslice", string(op), result(err)).Inc()
				if err == nil {
					importedEndpointSlices.WithLabelValues(string(op)).Inc()
				}
				if landed != nil {
					landed(op, s, took, err)
				}
			})
	})
}

// conclude writes the ServiceImport's spec and status, and announces lost clusters once the
// status without them has landed.
func (w importWriter) conclude(ctx context.Context, si *mcsv1beta1.ServiceImport, plan importplan.Sync, out importplan.DerivedOutcome) error {
	if spec := plan.ImportSpec(si, out); spec != nil {
		si.Spec = *spec
		if err := w.do("serviceimport", "update", si, func() error { return client.IgnoreNotFound(w.c.Update(ctx, si)) }); err != nil {
			return err
		}
	}
	write := plan.ImportStatus(si, out)
	if write == nil {
		return nil
	}
	si.Status = write.Status
	if err := w.do("serviceimport-status", "update", si, func() error { return client.IgnoreNotFound(w.c.Status().Update(ctx, si)) }); err != nil {
		return err
	}
	for _, e := range write.Announce {
		w.recorder.Eventf(si, nil, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
	return nil
}

// teardown removes the imported slices, the derived Service and the ServiceImport.
func (w importWriter) teardown(ctx context.Context, key types.NamespacedName, t *importplan.Teardown) error {
	if err := w.writeSlices(ctx, t.Slices); err != nil {
		return err
	}
	if d := t.DeleteDerived; d != nil {
		err := w.do("service", "delete", d, func() error {
			return client.IgnoreNotFound(w.c.Delete(ctx, d, client.Preconditions{UID: &d.UID}))
		})
		if err != nil {
			return err
		}
	}
	si := t.DeleteImport
	if si == nil {
		return nil
	}
	w.recorder.Eventf(si, nil, corev1.EventTypeNormal, ReasonImportDeleted, "Unimport", "No cluster exports %s any more", key)
	err := w.do("serviceimport", "delete", si, func() error {
		return client.IgnoreNotFound(w.c.Delete(ctx, si, client.Preconditions{UID: &si.UID}))
	})
	if err == nil {
		log.FromContext(ctx).Info("deleted the ServiceImport: the last export is gone", "serviceImport", key)
	}
	return err
}
