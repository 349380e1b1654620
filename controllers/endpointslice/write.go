package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetslice/fleetslice/controllers/slicewrite"
)

// write applies a plan through slicewrite: creates first so no endpoint is ever missing, then
// updates, then deletes, stopping at the first failure, because deleting slices whose
// replacements could not be written would drop endpoints; the retry plans again from what did
// land. It returns how long the write requests took together, the API time the plan cost
// (slicewrite makes them side by side, so the sync itself took less).
func (r *Reconciler) write(ctx context.Context, svc *corev1.Service, p *syncPlan) (apiTime time.Duration, err error) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	changes := slicewrite.Changes[*discoveryv1.EndpointSlice]{Create: p.create, Update: p.update, Delete: p.delete}
	err = slicewrite.Apply(ctx, r.Client, changes, func(op slicewrite.Op, s *discoveryv1.EndpointSlice, took time.Duration, err error) {
		apiTime += took
		if err != nil {
			return
		}
		if op == slicewrite.Delete {
			r.tracker.Deleted(key, s)
		} else {
			r.tracker.Wrote(key, s)
		}
		endpointSliceChanges.WithLabelValues(string(op)).Inc()
	})
	var failed *slicewrite.Error
	if errors.As(err, &failed) && failed.Op == slicewrite.Create && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// Creates keep failing while the namespace goes away; nothing left to do.
		return apiTime, nil
	}
	if err != nil {
		return apiTime, fmt.Errorf("writing the EndpointSlices of Service %s: %w", key, err)
	}
	return apiTime, nil
}

// report publishes a successful sync's metrics, log line and the events a user wants to see.
func (r *Reconciler) report(ctx context.Context, svc *corev1.Service, p *syncPlan) {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	endpointsAddedPerSync.WithLabelValues().Observe(float64(p.stats.Added))
	endpointsRemovedPerSync.WithLabelValues().Observe(float64(p.stats.Removed))
	endpointSlicesChangedPerSync.WithLabelValues(topologyLabel(p.efficiency.mode), p.efficiency.trafficDistribution).
		Observe(float64(p.writes()))
	r.totals.set(key, p.efficiency)
	if p.writes() == 0 {
		syncsUnchanged.Inc()
	}
	if p.writes() > 0 {
		log.FromContext(ctx).V(1).Info("synced EndpointSlices", "service", key,
			"created", len(p.create), "updated", len(p.update), "deleted", len(p.delete),
			"added", p.stats.Added, "removed", p.stats.Removed, "changed", p.stats.Changed,
			"rehinted", p.stats.Rehinted, "moved", p.stats.Moved)
	}
	if len(p.compacted) > 0 {
		r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, "CompactedEndpointSlices", "Compact",
			"Merged %d fragmented EndpointSlice(s) into the others (%s), moving %d endpoint(s)",
			len(p.compacted), strings.Join(p.compacted, ", "), p.stats.Moved)
	}
	if len(p.adopted) > 0 {
		r.Recorder.Eventf(svc, nil, corev1.EventTypeNormal, "AdoptedEndpointSlices", "Adopt",
			"Took over %d EndpointSlice(s) from %s: %s", len(p.adopted), UpstreamManagedBy, strings.Join(p.adopted, ", "))
	}
}
