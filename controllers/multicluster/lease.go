package multicluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

// leaseRenewer keeps this member's Lease in the broker fresh, and on shutdown optionally leaves
// the ClusterSet. It only runs in the elected manager replica.
type leaseRenewer struct {
	reader          client.Reader // uncached: the renewal must not act on a stale view
	writer          client.Client
	namespace, self string
	duration        time.Duration
	interval        time.Duration
	writeTimeout    time.Duration
	leaveOnShutdown bool
	leaving         *atomic.Bool
	log             logr.Logger
	// demand, when set, returns the annotations that publish this member's Node CPU (see
	// demand.go); they ride on the renewal, which is written anyway. It reads the member's own
	// API server, so it runs in a loop of its own (refreshDemand) and a renewal publishes the
	// last value read: the Lease lives in the broker, and a member API server that is down or
	// restarting must not hold its renewal back.
	demand func(ctx context.Context) map[string]string
	demandState
	// first, when set, is announced on the Lease while this member publishes the exports it
	// started with; the renewer renews at once when that ends, so peers wait no longer.
	first *firstExports
	// outage, when set, learns from every renewal whether the broker answers.
	outage *brokerOutage
}

// NeedLeaderElection keeps a standby replica from renewing (and leaving) for the active one.
func (r *leaseRenewer) NeedLeaderElection() bool { return true }

// Start renews the Lease every interval until ctx ends.
func (r *leaseRenewer) Start(ctx context.Context) error {
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	var firstDone <-chan struct{}
	if r.first != nil {
		firstDone = r.first.finished
	}
	if r.demand != nil {
		go r.refreshDemand(ctx)
		// The first renewal waits, at most a renew interval, for the first read, so that a new
		// Lease is created with the demand rather than updated with it a renewal later.
		r.awaitDemand(ctx, r.interval)
	}
	failing := false
	for {
		err := r.renewCounted(ctx)
		if r.first != nil {
			r.first.firstRenewalEnded()
		}
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			r.log.Error(err, "renewing the member Lease failed; peers will withdraw this cluster's endpoints if it lapses", "lease", liveness.LeaseName(r.self))
			failing = true
		case err == nil && failing:
			r.log.Info("renewing the member Lease works again", "lease", liveness.LeaseName(r.self))
			failing = false
		}
		select {
		case <-ctx.Done():
			if r.leaveOnShutdown {
				r.leaving.Store(true)
				// ctx is done: leave on a context that keeps its values (the logger) but not
				// its cancellation, bounded by its own timeout.
				leaveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultLeaveTimeout)
				defer cancel()
				if err := Leave(leaveCtx, r.writer, r.namespace, r.self); err != nil {
					r.log.Error(err, "leaving the ClusterSet failed; peers will drop this cluster when its Lease lapses")
					return nil
				}
				r.log.Info("left the ClusterSet: records, slice copies and Lease deleted")
				return nil
			}
			r.handOver(ctx)
			return nil
		case <-ticker.C:
		case <-firstDone:
			firstDone = nil
		}
	}
}

// handOver renews the Lease once more as the manager stops without leaving. A restart (a
// rolling upgrade, a rescheduled Pod) then has a full lease duration from the stop to renew
// again before peers withdraw this cluster's endpoints, not only what was left of the last
// periodic renewal: up to a renew interval less.
func (r *leaseRenewer) handOver(ctx context.Context) {
	if err := r.renewCounted(context.WithoutCancel(ctx)); err != nil {
		r.log.Error(err, "renewing the member Lease on shutdown failed; a restart must renew within what is left of the last renewal", "lease", liveness.LeaseName(r.self))
		return
	}
	r.log.Info("renewed the member Lease on shutdown for the next replica", "lease", liveness.LeaseName(r.self))
}

// renewCounted renews and counts the outcome in the renewals metric.
func (r *leaseRenewer) renewCounted(ctx context.Context) error {
	err := r.renew(ctx)
	leaseRenewals.WithLabelValues(r.self, result(err)).Inc()
	if ctx.Err() == nil {
		r.outage.observe(err)
		reachable := 1.0
		if err != nil && transient(err) {
			reachable = 0
		}
		brokerReachable.WithLabelValues(r.self).Set(reachable)
	}
	return err
}

func (r *leaseRenewer) renew(ctx context.Context) error {
	if r.leaving.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.writeTimeout)
	defer cancel()
	lease := &coordinationv1.Lease{}
	err := r.reader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: liveness.LeaseName(r.self)}, lease)
	// Stamped after the read: on a busy broker the read alone can take seconds, and a renewal
	// stamped before it would vouch for less than a lease duration.
	now := metav1.NewMicroTime(time.Now())
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   r.namespace,
				Name:        liveness.LeaseName(r.self),
				Labels:      map[string]string{v1alpha1.LabelSourceCluster: r.self},
				Annotations: r.announce(r.demandAnnotations(nil)),
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(r.self),
				LeaseDurationSeconds: ptr.To(int32(r.duration / time.Second)),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}
		err = r.writer.Create(ctx, lease)
		brokerWrites.WithLabelValues("lease", "create", result(err)).Inc()
		return err
	case err != nil:
		return err
	}
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[v1alpha1.LabelSourceCluster] = r.self
	lease.Annotations = r.announce(r.demandAnnotations(lease.Annotations))
	lease.Spec.HolderIdentity = ptr.To(r.self)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(r.duration / time.Second))
	lease.Spec.RenewTime = &now
	err = r.writer.Update(ctx, lease)
	brokerWrites.WithLabelValues("lease", "update", result(err)).Inc()
	return err
}

// Leave removes everything cluster published to the broker namespace: its records, its
// EndpointSlice copies and its Lease. Peers then drop its endpoints at once. Use it when a
// member leaves the ClusterSet for good (`fleetslice down`, decommissioning); a member that
// merely restarts should not leave, or its endpoints blink out everywhere.
func Leave(ctx context.Context, brokerClient client.Client, namespace, cluster string) error {
	if cluster == "" {
		return errors.New("no cluster id given")
	}
	selector := client.MatchingLabels{v1alpha1.LabelSourceCluster: cluster}
	var errs []error
	records := &v1alpha1.ServiceExportRecordList{}
	if err := brokerClient.List(ctx, records, client.InNamespace(namespace), selector); err != nil {
		errs = append(errs, fmt.Errorf("listing records: %w", err))
	}
	for i := range records.Items {
		err := client.IgnoreNotFound(brokerClient.Delete(ctx, &records.Items[i]))
		brokerWrites.WithLabelValues("record", "delete", result(err)).Inc()
		errs = append(errs, err)
	}
	copies := &discoveryv1.EndpointSliceList{}
	if err := brokerClient.List(ctx, copies, client.InNamespace(namespace), selector); err != nil {
		errs = append(errs, fmt.Errorf("listing slice copies: %w", err))
	}
	for i := range copies.Items {
		err := client.IgnoreNotFound(brokerClient.Delete(ctx, &copies.Items[i]))
		brokerWrites.WithLabelValues("endpointslice", "delete", result(err)).Inc()
		errs = append(errs, err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: liveness.LeaseName(cluster)}}
	err := client.IgnoreNotFound(brokerClient.Delete(ctx, lease))
	brokerWrites.WithLabelValues("lease", "delete", result(err)).Inc()
	errs = append(errs, err)
	return errors.Join(errs...)
}

// announce sets the first publication's announcement on a Lease's annotations while it runs,
// and once it ended how many records it published.
func (r *leaseRenewer) announce(annotations map[string]string) map[string]string {
	want := map[string]string{}
	if r.first != nil {
		if since := r.first.announcement(); since != "" {
			want[v1alpha1.AnnotationPublishingSince] = since
		} else if n, ok := r.first.publishedRecords(); ok {
			want[v1alpha1.AnnotationFirstPublicationRecords] = strconv.Itoa(n)
		}
	}
	changed := false
	for _, key := range []string{v1alpha1.AnnotationPublishingSince, v1alpha1.AnnotationFirstPublicationRecords} {
		have, ok := annotations[key]
		if value, wanted := want[key]; ok != wanted || have != value {
			changed = true
		}
	}
	if !changed {
		return annotations
	}
	annotations = maps.Clone(annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	for _, key := range []string{v1alpha1.AnnotationPublishingSince, v1alpha1.AnnotationFirstPublicationRecords} {
		if value, wanted := want[key]; wanted {
			annotations[key] = value
		} else {
			delete(annotations, key)
		}
	}
	return annotations
}
