package multicluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

// membershipKey is the only request of the membership controller: every Lease event judges
// all members again, which is cheap (one Lease per member) and keeps the verdict consistent.
var membershipKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "members"}}

// membership holds this member's current verdict on its peers and tells the export and import
// controllers when a peer is lost or comes back.
type membership struct {
	self            string
	namespace       string
	defaultDuration time.Duration
	reader          client.Reader // the broker cache
	// withdraw, when set, removes a lost cluster's imported slices at once.
	withdraw func(ctx context.Context, cluster string) error
	// initialWait bounds how long new imports wait for a member's first publication
	// (Options.InitialExportsWait); 0 waits for none.
	initialWait time.Duration

	mu          sync.RWMutex
	verdict     liveness.Verdict
	starts      liveness.Starts
	subscribers []subscriber
	// leasesRead is set by the first reading of the Leases: until then, which members are still
	// publishing is unknown (Publishing is empty only for want of knowing).
	leasesRead bool
}

func newMembership(self, namespace string, defaultDuration time.Duration, reader client.Reader) *membership {
	return &membership{
		self:            self,
		namespace:       namespace,
		defaultDuration: defaultDuration,
		reader:          reader,
		verdict:         liveness.Judge(self, nil, liveness.Verdict{}),
	}
}

// IsLive says whether cluster's exports count in this member's imports and conflicts.
func (m *membership) IsLive(cluster string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.verdict.IsLive(cluster)
}

// Publishing returns the live members, this one included, whose first publication new
// imports wait for.
func (m *membership) Publishing() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.starts.Waiting(m.verdict, time.Now(), m.initialWait)
}

// PublishingKnown says whether Publishing can be trusted: the Leases have been read, or no
// first publication is waited for at all. A new import created before that would be created
// from whatever records the broker cache holds while every member is still publishing, and
// written again as each further exporter's record arrives.
func (m *membership) PublishingKnown() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.leasesRead || m.initialWait == 0
}

// subscriber is a channel announcements are sent on; releases says whether it is also told when
// new imports held back for members' first publications may go ahead.
type subscriber struct {
	ch       chan event.GenericEvent
	releases bool
}

// subscribe returns a channel on which the clusters whose liveness flipped are announced, as
// GenericEvents carrying a Lease stub labelled with the cluster (unlabelled: every cluster),
// and every cluster when the new imports held back for first publications may go ahead.
func (m *membership) subscribe() chan event.GenericEvent {
	return m.addSubscriber(true)
}

// subscribeLiveness is subscribe without the releases of held-back imports: for a controller
// that reads IsLive alone (the export controller's conflicts), to which a release is a sweep
// of every Service that changes nothing.
func (m *membership) subscribeLiveness() chan event.GenericEvent {
	return m.addSubscriber(false)
}

func (m *membership) addSubscriber(releases bool) chan event.GenericEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan event.GenericEvent, 256)
	m.subscribers = append(m.subscribers, subscriber{ch: ch, releases: releases})
	return ch
}

// Reconcile judges every member Lease in the broker cache.
func (m *membership) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	leases, announced, catchingUp, err := m.readLeases(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := time.Now()
	m.mu.Lock()
	next := liveness.Judge(m.self, leases, m.verdict)
	change := liveness.Diff(m.verdict, next)
	starts := liveness.ObserveStarts(m.starts, announced, now)
	waitedBefore := m.starts.Waiting(m.verdict, now, m.initialWait)
	waiting := starts.Waiting(next, now, m.initialWait)
	deadline := starts.NextDeadline(next, now, m.initialWait)
	m.verdict, m.starts = next, starts
	firstReading := !m.leasesRead
	m.leasesRead = true
	subscribers := m.subscribers
	m.mu.Unlock()

	var result reconcile.Result
	if !deadline.IsZero() {
		// The wait ends on this member's clock, not with a Lease event: look again then.
		result.RequeueAfter = deadline.Sub(now)
	}
	if catchingUp && (result.RequeueAfter == 0 || result.RequeueAfter > recordsCatchUpPoll) {
		// Records arrive without a Lease event: count them again shortly.
		result.RequeueAfter = recordsCatchUpPoll
	}
	// New imports held back wait for every peer still publishing (importplan's waitingFor), so
	// they can go ahead only once none is left: releasing them earlier would run every held
	// import again to hold it back again, once per member that finishes.
	goAhead := !waitsForPeers(waiting, m.self)
	finished := finishedStarts(waitedBefore, waiting)
	if len(finished) > 0 {
		logger.Info("members published their first exports, or were waited for long enough",
			"clusters", finished, "stillWaitingFor", waiting, "heldImportsGoAhead", goAhead)
	}
	// Imports are held for a start that has now finished, or, until the first reading, for
	// want of knowing who publishes.
	release := goAhead && (len(finished) > 0 || (firstReading && m.initialWait > 0))

	for cluster, live := range next.Live {
		clusterLive.WithLabelValues(m.self, cluster).Set(boolGauge(live))
	}
	if change.Empty() && !release {
		return result, nil
	}
	for _, cluster := range change.Clusters {
		state := "lost"
		if next.IsLive(cluster) {
			state = "live"
		}
		clusterTransitions.WithLabelValues(m.self, cluster, state).Inc()
		logger.Info("peer liveness changed", "cluster", cluster, "state", state,
			"leaseExpiry", next.Expiries[cluster], "reference", next.Reference)
		if state == "lost" && m.withdraw != nil {
			if err := m.withdraw(ctx, cluster); err != nil {
				// The import controller withdraws them too, one ServiceImport at a time.
				logger.Error(err, "bulk withdrawal of a lost cluster's endpoints failed", "cluster", cluster)
			}
		}
	}
	if err := announce(ctx, subscribers, change, release); err != nil {
		return reconcile.Result{}, err
	}
	return result, nil
}

// waitsForPeers says whether a member other than self is among those still waited for.
func waitsForPeers(waiting []string, self string) bool {
	return slices.ContainsFunc(waiting, func(c string) bool { return c != self })
}

// announce tells every subscriber of the liveness change: one announcement naming no cluster
// when everyone's Services are concerned, and one per cluster whose liveness flipped. Those
// told of releases hear of every Service as well when release is set.
func announce(ctx context.Context, subscribers []subscriber, change liveness.Change, release bool) error {
	for _, sub := range subscribers {
		everyone := change.Everyone || (release && sub.releases)
		if err := send(ctx, sub.ch, announcements(change.Clusters, everyone)); err != nil {
			return err
		}
	}
	return nil
}

func announcements(clusters []string, everyone bool) []event.GenericEvent {
	out := make([]event.GenericEvent, 0, len(clusters)+1)
	if everyone {
		out = append(out, event.GenericEvent{Object: &coordinationv1.Lease{}})
	}
	for _, cluster := range clusters {
		out = append(out, event.GenericEvent{Object: &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelSourceCluster: cluster}},
		}})
	}
	return out
}

func send(ctx context.Context, ch chan event.GenericEvent, announcements []event.GenericEvent) error {
	for _, a := range announcements {
		select {
		case ch <- a:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// readLeases reads every member Lease in the broker cache, with each member's first
// publication announcement. A member this one waited for whose Lease says it is done, but
// whose records are not all in the cache yet, stays announced (catchingUp).
func (m *membership) readLeases(ctx context.Context) (leases []liveness.Lease, announced map[string]string, catchingUp bool, err error) {
	list := &coordinationv1.LeaseList{}
	if err := m.reader.List(ctx, list, client.InNamespace(m.namespace)); err != nil {
		return nil, nil, false, err
	}
	m.mu.RLock()
	waited := m.starts
	m.mu.RUnlock()
	announced = map[string]string{}
	for i := range list.Items {
		l, ok := liveness.FromLease(&list.Items[i], m.defaultDuration)
		if !ok {
			continue
		}
		leases = append(leases, l)
		announced[l.Cluster] = liveness.PublishingSince(&list.Items[i])
		// Within the bound only: a count never reached (an export deleted meanwhile) neither
		// holds imports back nor keeps this controller polling past it.
		if start, ok := waited[l.Cluster]; ok && announced[l.Cluster] == "" && time.Since(start.Seen) < m.initialWait {
			behind, err := m.recordsBehind(ctx, &list.Items[i], l.Cluster)
			if err != nil {
				return nil, nil, false, err
			}
			if behind {
				// Still the same start, and still bounded from when it was first seen.
				announced[l.Cluster], catchingUp = start.Since, true
			}
		}
	}
	return leases, announced, catchingUp, nil
}

// recordsCatchUpPoll is how often the broker cache is counted while a member's first
// publication has ended and its last records are still on their way.
const recordsCatchUpPoll = 200 * time.Millisecond

// recordsBehind says whether a member whose first publication ended, by its Lease, has
// published more records than this member's broker cache holds of it yet.
func (m *membership) recordsBehind(ctx context.Context, lease *coordinationv1.Lease, cluster string) (bool, error) {
	published, err := strconv.Atoi(lease.Annotations[v1alpha1.AnnotationFirstPublicationRecords])
	if err != nil || published <= 0 {
		// None said (a member of an older version), or nothing to wait for.
		return false, nil
	}
	records := &v1alpha1.ServiceExportRecordList{}
	if err := m.reader.List(ctx, records, client.InNamespace(m.namespace),
		client.MatchingFields{indexBrokerCluster: cluster}, client.UnsafeDisableDeepCopy); err != nil {
		return false, fmt.Errorf("counting %s's records: %w", cluster, err)
	}
	return len(records.Items) < published, nil
}

// finishedStarts returns the clusters waited for before and not any more.
func finishedStarts(before, now []string) []string {
	var out []string
	for _, c := range before {
		if !slices.Contains(now, c) {
			out = append(out, c)
		}
	}
	return out
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// servicesOfAnnouncedCluster maps an announcement to every exported Service the cluster has
// records for (all exported Services when the announcement names no cluster).
func servicesOfAnnouncedCluster(reader client.Reader, namespace string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		opts := []client.ListOption{client.InNamespace(namespace)}
		if cluster := obj.GetLabels()[v1alpha1.LabelSourceCluster]; cluster != "" {
			opts = append(opts, client.MatchingFields{indexBrokerCluster: cluster})
		}
		records := &v1alpha1.ServiceExportRecordList{}
		if err := reader.List(ctx, records, opts...); err != nil {
			log.FromContext(ctx).Error(err, "listing broker records for a membership change")
			return nil
		}
		return requestsForBrokerObjects(records.Items)
	})
}

func requestsForBrokerObjects(records []v1alpha1.ServiceExportRecord) []reconcile.Request {
	seen := map[types.NamespacedName]bool{}
	out := make([]reconcile.Request, 0, len(records))
	for i := range records {
		ns, name, ok := brokerServiceOf(&records[i])
		key := types.NamespacedName{Namespace: ns, Name: name}
		if !ok || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, reconcile.Request{NamespacedName: key})
	}
	return out
}
