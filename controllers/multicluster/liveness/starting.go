package liveness

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// A member that starts publishes its exports one reconcile at a time, and its peers create
// their imports as the records arrive: an import made from the first exporter's record is
// written again (its status names its clusters) as each further exporter's record comes in.
// So a starting member says so on its Lease (AnnotationPublishingSince) until every export it
// had at start is published, and its peers hold back new imports meanwhile, but never longer
// than a bound counted on their own clock from when they first saw the announcement: a member
// that never finishes (a broker write failing for one export) delays nothing for long.

// PublishingSince returns the value of a Lease's publishing announcement; "" when it has none.
func PublishingSince(lease *coordinationv1.Lease) string {
	if lease == nil {
		return ""
	}
	return lease.Annotations[v1alpha1.AnnotationPublishingSince]
}

// Starts is what one member saw of its peers' (and its own) first publications: for each
// cluster announcing one, the announcement and when this member first saw it.
type Starts map[string]StartSeen

// StartSeen is one announcement and the local time it was first seen.
type StartSeen struct {
	Since string
	Seen  time.Time
}

// ObserveStarts returns the starts announced now (cluster -> announcement value; "" for none),
// keeping the first-seen time of every announcement that did not change.
func ObserveStarts(prev Starts, announced map[string]string, now time.Time) Starts {
	next := Starts{}
	for cluster, since := range announced {
		if since == "" {
			continue
		}
		seen := now
		if p, ok := prev[cluster]; ok && p.Since == since {
			seen = p.Seen
		}
		next[cluster] = StartSeen{Since: since, Seen: seen}
	}
	return next
}

// Waiting returns the clusters whose first publication new imports wait for, ascending: those
// the verdict holds live whose announcement was first seen less than bound ago. A bound of 0
// waits for none.
func (s Starts) Waiting(v Verdict, now time.Time, bound time.Duration) []string {
	var out []string
	for cluster, start := range s {
		if v.IsLive(cluster) && now.Sub(start.Seen) < bound {
			out = append(out, cluster)
		}
	}
	slices.Sort(out)
	return out
}

// NextDeadline returns when the earliest of the waited-for announcements stops being waited
// for; zero when none is.
func (s Starts) NextDeadline(v Verdict, now time.Time, bound time.Duration) time.Time {
	var next time.Time
	for _, cluster := range s.Waiting(v, now, bound) {
		if d := s[cluster].Seen.Add(bound); next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next
}
