package multicluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// withdrawConcurrency bounds the deletes in flight while withdrawing a lost cluster.
const withdrawConcurrency = 16

// withdrawer removes every imported EndpointSlice of a lost cluster from this member at once.
// The import controller would remove them too, but one ServiceImport at a time; with hundreds of
// exported Services that takes longer than a lease period, and traffic keeps going to the lost
// cluster meanwhile. The import controller still reconciles each ServiceImport afterwards for
// its status.
//
// The slices are deleted one by one from a pool of workers rather than by DeleteCollection:
// the API server works through a collection delete serially (--delete-collection-workers
// defaults to 1), which measured 40-47 s for 1,000 slices on a busy 2-core machine.
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
	work := make(chan *discoveryv1.EndpointSlice)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(withdrawConcurrency, len(list.Items)) {
		wg.Go(func() {
			for slice := range work {
				// The UID precondition spares a slice the import controller recreated under the
				// same name since the cache was read (the cluster came back meanwhile).
				victim := &discoveryv1.EndpointSlice{}
				victim.Namespace, victim.Name = slice.Namespace, slice.Name
				err := w.writer.Delete(ctx, victim, client.Preconditions{UID: &slice.UID})
				if client.IgnoreNotFound(err) != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("withdrawing %s's slice %s/%s: %w", cluster, slice.Namespace, slice.Name, err))
					mu.Unlock()
				}
			}
		})
	}
	for i := range list.Items {
		work <- &list.Items[i]
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}
