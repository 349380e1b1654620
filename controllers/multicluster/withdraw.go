package multicluster

import (
	"context"
	"errors"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=deletecollection

// withdrawer removes every imported EndpointSlice of a lost cluster from this member in one
// DeleteCollection per namespace. The import controller would remove them too, but one
// ServiceImport at a time; with hundreds of exported Services that takes longer than a lease
// period, and traffic keeps going to the lost cluster meanwhile. The import controller still
// reconciles each ServiceImport afterwards for its status.
type withdrawer struct {
	reader client.Reader // the member cache
	writer client.Writer
}

func (w withdrawer) withdraw(ctx context.Context, cluster string) error {
	selector := client.MatchingLabels{
		mcsv1beta1.LabelSourceCluster: cluster,
		discoveryv1.LabelManagedBy:    sliceplan.ManagedBy,
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := w.reader.List(ctx, list, selector, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing imported slices of %s: %w", cluster, err)
	}
	namespaces := map[string]bool{}
	for i := range list.Items {
		namespaces[list.Items[i].Namespace] = true
	}
	var errs []error
	for ns := range namespaces {
		if err := w.writer.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace(ns), selector); err != nil {
			errs = append(errs, fmt.Errorf("withdrawing %s's slices in %s: %w", cluster, ns, err))
		}
	}
	return errors.Join(errs...)
}
