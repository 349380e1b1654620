// Package liveness decides, without client calls, which member clusters of a ClusterSet are
// live, from the Leases they renew in the broker.
//
// A member judges its peers against its own most recent renewal as it observes it through the
// broker watch, not against its wall clock. Watch events of one resource arrive in order, so
// seeing our own renewal at time R means every peer renewal written before it has been seen
// too. That makes the verdict safe in both directions that matter:
//   - when this member is cut off from the broker, its own renewals stop arriving, the
//     reference stops moving, and no peer expires: the last known imports stay (no flapping);
//   - when the connection returns, peers are judged only once our own fresh renewal has come
//     through the same, now current, watch, so stale peer leases from before the cut are not
//     mistaken for lost ones.
//
// After a gap in our own renewals (the reference jumps by more than our lease duration: this
// member was cut off, or has just started), every peer gets one more lease duration to renew
// before it is judged: after a broker outage all leases look expired, and whoever reconnects
// first must not withdraw the others only because they have not renewed yet.
//
// So a peer is lost once reference > its renewTime + leaseDuration and reference > the start
// of our current unbroken run of renewals + our lease duration. The member itself is always
// live in its own eyes. Peers without a Lease count like peers whose lease expired long ago.
// Before our first renewal is seen (zero reference) every peer is live.
package liveness

import (
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// LeasePrefix starts the name of every member's Lease: member-<cluster id>.
const LeasePrefix = "member-"

// LeaseName returns the name of the Lease cluster renews in the broker.
func LeaseName(cluster string) string {
	return LeasePrefix + cluster
}

// Lease is what the verdict needs of one member's Lease.
type Lease struct {
	Cluster   string
	RenewTime time.Time
	Duration  time.Duration
}

// Expiry is the moment after which the lease no longer vouches for its cluster.
func (l Lease) Expiry() time.Time {
	return l.RenewTime.Add(l.Duration)
}

// FromLease reads a broker Lease. It reports false for a Lease that is not a member's: one
// without the source-cluster label, or whose name does not match that label.
func FromLease(lease *coordinationv1.Lease, defaultDuration time.Duration) (Lease, bool) {
	if lease == nil {
		return Lease{}, false
	}
	cluster := lease.Labels[v1alpha1.LabelSourceCluster]
	if cluster == "" || lease.Name != LeaseName(cluster) {
		return Lease{}, false
	}
	out := Lease{Cluster: cluster, Duration: defaultDuration}
	switch {
	case lease.Spec.RenewTime != nil:
		out.RenewTime = lease.Spec.RenewTime.Time
	case lease.Spec.AcquireTime != nil:
		out.RenewTime = lease.Spec.AcquireTime.Time
	}
	if s := lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		out.Duration = time.Duration(*s) * time.Second
	}
	if out.Duration < 0 {
		out.Duration = 0
	}
	return out, true
}

// Verdict is one member's view of which clusters are live.
type Verdict struct {
	// Self is the judging member; it is always live.
	Self string
	// Reference is the renewal time of Self's own lease as observed; zero when not seen yet.
	Reference time.Time
	// Since is when the current unbroken run of our own observed renewals began.
	Since time.Time
	// Grace is how long after Since peers are not judged; Self's own lease duration.
	Grace time.Duration
	// Live holds the verdict of every peer that has a Lease.
	Live map[string]bool
	// Expiries holds when each peer's lease runs out, for status and metrics.
	Expiries map[string]time.Time
}

// Judge returns self's verdict over the given leases, continuing from the previous verdict
// (the zero Verdict at start). Duplicate leases of one cluster (which the broker's naming rules
// out) resolve to the latest expiry.
func Judge(self string, leases []Lease, prev Verdict) Verdict {
	v := Verdict{Self: self, Live: map[string]bool{}, Expiries: map[string]time.Time{}}
	for _, l := range leases {
		if l.Cluster == self && (v.Reference.IsZero() || l.RenewTime.After(v.Reference)) {
			v.Reference, v.Grace = l.RenewTime, l.Duration
		}
	}
	v.Since = prev.Since
	unbroken := !prev.Reference.IsZero() && prev.Self == self &&
		!v.Reference.Before(prev.Reference) && v.Reference.Sub(prev.Reference) <= v.Grace
	if !unbroken {
		v.Since = v.Reference
	}
	for _, l := range leases {
		if l.Cluster == self || l.Cluster == "" {
			continue
		}
		expiry := l.Expiry()
		if known, ok := v.Expiries[l.Cluster]; ok && known.After(expiry) {
			expiry = known
		}
		v.Expiries[l.Cluster] = expiry
	}
	for cluster, expiry := range v.Expiries {
		v.Live[cluster] = !v.judges() || !v.Reference.After(expiry)
	}
	return v
}

// judges reports whether peers can be found lost at all: only once our own renewals have run
// unbroken for a full grace period.
func (v Verdict) judges() bool {
	return !v.Reference.IsZero() && v.Reference.After(v.Since.Add(v.Grace))
}

// IsLive says whether cluster's exports count in this member's imports.
func (v Verdict) IsLive(cluster string) bool {
	if cluster == v.Self {
		return true
	}
	if live, ok := v.Live[cluster]; ok {
		return live
	}
	return !v.judges()
}

// LiveClusters returns the clusters among candidates that are live, ascending and unique.
func (v Verdict) LiveClusters(candidates []string) []string {
	out := make([]string, 0, len(candidates))
	for _, c := range candidates {
		if v.IsLive(c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Change says how the verdict moved between two judgements.
type Change struct {
	// Clusters lists the peers whose liveness flipped, ascending.
	Clusters []string
	// Everyone is set when the judgement of clusters without a Lease flipped too (a grace
	// period began or ended): every cluster's exports must be looked at again.
	Everyone bool
}

// Empty reports whether nothing changed.
func (c Change) Empty() bool {
	return len(c.Clusters) == 0 && !c.Everyone
}

// Diff returns what changed from prev to next.
func Diff(prev, next Verdict) Change {
	var change Change
	change.Everyone = prev.judges() != next.judges() || prev.Self != next.Self
	seen := map[string]bool{}
	for _, verdict := range []Verdict{prev, next} {
		for cluster := range verdict.Live {
			if seen[cluster] {
				continue
			}
			seen[cluster] = true
			if prev.IsLive(cluster) != next.IsLive(cluster) {
				change.Clusters = append(change.Clusters, cluster)
			}
		}
	}
	slices.SortFunc(change.Clusters, strings.Compare)
	return change
}

// NextExpiry returns the earliest expiry among live peers, or zero when none is live. It is
// only informative: the verdict moves when the reference does, which a watch event delivers.
func (v Verdict) NextExpiry() time.Time {
	var next time.Time
	for cluster, expiry := range v.Expiries {
		if !v.Live[cluster] {
			continue
		}
		if next.IsZero() || expiry.Before(next) {
			next = expiry
		}
	}
	return next
}
