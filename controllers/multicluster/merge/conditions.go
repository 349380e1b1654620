package merge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

const (
	// messageClusterLimit and messagePortLimit keep messages readable at 100 clusters.
	messageClusterLimit = 5
	messagePortLimit    = 3
	// maxMessageBytes is the length metav1.Condition allows for a message.
	maxMessageBytes = 32768
)

// conflictDescriber writes the Conflict condition of each export. Everything that does not
// depend on the reading cluster is prepared once, so a Service exported by 100 clusters does
// not rebuild the same cluster lists 100 times.
type conflictDescriber struct {
	oldest   string
	service  string
	reason   string
	prefixes [2]string // [0] for the oldest export, [1] for every other one
	// portDiffering[0] tells the oldest export, [1] an export with the oldest's ports, which
	// clusters export other ports.
	portDiffering [2]string
	// portClashes tells an export that lost no port itself which clusters did.
	portClashes string
	// differing lists, sorted, the clusters whose ports are not the oldest export's.
	differing      []string
	lossesByReader map[string][]portLoss
	reasons        []mcsv1beta1.ServiceExportConditionReason
	fields         map[mcsv1beta1.ServiceExportConditionReason]*describedField
}

type describedField struct {
	*fieldConflict
	// shared[0] is the clause for the oldest export, shared[1] for exports that agree with it.
	shared [2]string
}

func newConflictDescriber(
	oldest *Record,
	reasons []mcsv1beta1.ServiceExportConditionReason,
	ports unitedPorts,
	fields map[mcsv1beta1.ServiceExportConditionReason]*fieldConflict,
) *conflictDescriber {
	d := &conflictDescriber{
		oldest:    oldest.ClusterID,
		service:   oldest.ServiceNamespace + "/" + oldest.ServiceName,
		reasons:   reasons,
		differing: ports.differing,
	}
	if len(reasons) == 0 {
		d.reason = string(mcsv1beta1.ServiceExportReasonNoConflicts)
		return d
	}

	joined := make([]string, len(reasons))
	for i, r := range reasons {
		joined[i] = string(r)
	}
	d.reason = strings.Join(joined, ",")

	exported := oldest.ExportCreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
	for i, reader := range []string{d.oldest, ""} {
		d.prefixes[i] = fmt.Sprintf("Exports of %s conflict; the oldest export (%s, exported %s) wins: ",
			d.service, clusterRef(reader, d.oldest), exported)
	}

	if ports.conflict() {
		n := len(ports.differing)
		d.portDiffering[0] = fmt.Sprintf("%s %s other ports than this export", clusterList(ports.differing), exportOrExports(n))
		d.portDiffering[1] = fmt.Sprintf("%s %s other ports than the oldest export (%s)", clusterList(ports.differing), exportOrExports(n), clusterRef("", d.oldest))
	}
	if len(ports.losses) > 0 {
		d.lossesByReader = map[string][]portLoss{}
		var losers []string
		for _, loss := range ports.losses {
			if d.lossesByReader[loss.cluster] == nil {
				losers = append(losers, loss.cluster)
			}
			d.lossesByReader[loss.cluster] = append(d.lossesByReader[loss.cluster], loss)
		}
		slices.Sort(losers)
		d.portClashes = fmt.Sprintf("%s %s ports that clash with older exports' ports, which are left out",
			clusterList(losers), hasOrHave(len(losers)))
	}

	d.fields = make(map[mcsv1beta1.ServiceExportConditionReason]*describedField, len(fields))
	for reason, conflict := range fields {
		described := &describedField{fieldConflict: conflict}
		others := differing(conflict.dissenters)
		for i, reader := range []string{d.oldest, ""} {
			winner := clusterRef(reader, d.oldest)
			if conflict.winning != "" {
				described.shared[i] = fmt.Sprintf("%s: %s from %s is used; %s", conflict.field, conflict.winning, winner, others)
			} else {
				described.shared[i] = fmt.Sprintf("%s: those of %s are used; %s", conflict.field, winner, others)
			}
		}
		d.fields[reason] = described
	}
	return d
}

// describe builds the Conflict condition of cluster's export. The reasons are the same for
// every export of the Service; the message tells this cluster what happened to its own
// values and whose values are used instead.
func (d *conflictDescriber) describe(cluster string) ClusterConflict {
	if len(d.reasons) == 0 {
		// The same words however many clusters export: a peer exporting (say, every member of a
		// ClusterSet starting at once) must not rewrite every export's status.
		return ClusterConflict{Cluster: cluster, Reason: d.reason, Message: "No conflicts among the exports of " + d.service}
	}

	reader := 1
	if cluster == d.oldest {
		reader = 0
	}
	var message strings.Builder
	message.WriteString(d.prefixes[reader])
	for i, reason := range d.reasons {
		if i > 0 {
			message.WriteString("; ")
		}
		if reason == mcsv1beta1.ServiceExportReasonPortConflict {
			message.WriteString(d.describePorts(cluster))
			continue
		}
		field := d.fields[reason]
		if _, differs := slices.BinarySearch(field.dissenters, cluster); !differs {
			message.WriteString(field.shared[reader])
			continue
		}
		winner := clusterRef(cluster, d.oldest)
		if field.winning != "" {
			fmt.Fprintf(&message, "%s: this export has %s, but %s from %s is used", field.field, field.values[cluster], field.winning, winner)
		} else {
			fmt.Fprintf(&message, "%s: this export's differ from those of %s, which are used", field.field, winner)
		}
	}
	return ClusterConflict{
		Cluster:  cluster,
		Conflict: true,
		Reason:   d.reason,
		Message:  truncate(message.String(), maxMessageBytes),
	}
}

func (d *conflictDescriber) describePorts(cluster string) string {
	var clauses []string
	own := d.lossesByReader[cluster]
	_, differs := slices.BinarySearch(d.differing, cluster)
	switch {
	case len(own) > 0:
		clashes := make([]string, 0, min(len(own), messagePortLimit))
		for _, loss := range own[:min(len(own), messagePortLimit)] {
			clashes = append(clashes, fmt.Sprintf("%s clashes with %s from %s, which is used",
				describePort(loss.port), describePort(loss.winner), clusterRef(cluster, loss.winnerCluster)))
		}
		text := "this export's " + strings.Join(clashes, ", ")
		if extra := len(own) - len(clashes); extra > 0 {
			text += fmt.Sprintf(" and %d more", extra)
		}
		clauses = append(clauses, text)
	case differs:
		clauses = append(clauses, fmt.Sprintf("this export's ports differ from those of the oldest export (%s)", clusterRef(cluster, d.oldest)))
	case cluster == d.oldest:
		clauses = append(clauses, d.portDiffering[0])
	default:
		clauses = append(clauses, d.portDiffering[1])
	}
	if len(own) == 0 && d.portClashes != "" {
		clauses = append(clauses, d.portClashes)
	}
	return "ports: " + strings.Join(clauses, ", and ") +
		" (the import offers the union of the ports that do not clash; each reaches only the clusters that export it)"
}

// clusterRef names other, or says "this export" when the reader is that cluster.
func clusterRef(reader, other string) string {
	if reader == other {
		return "this export"
	}
	return "cluster " + strconv.Quote(other)
}

// clusterList names at most messageClusterLimit clusters and counts the rest.
func clusterList(clusters []string) string {
	shown := clusters[:min(len(clusters), messageClusterLimit)]
	quoted := make([]string, len(shown))
	for i, c := range shown {
		quoted[i] = strconv.Quote(c)
	}
	noun := "clusters "
	if len(clusters) == 1 {
		noun = "cluster "
	}
	text := noun + strings.Join(quoted, ", ")
	if extra := len(clusters) - len(shown); extra > 0 {
		text += fmt.Sprintf(" and %d more", extra)
	}
	return text
}

func exportOrExports(n int) string {
	if n == 1 {
		return "exports"
	}
	return "export"
}

func hasOrHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

// differing says which clusters export another value, e.g. `cluster "b" differs`.
func differing(clusters []string) string {
	if len(clusters) == 1 {
		return clusterList(clusters) + " differs"
	}
	return clusterList(clusters) + " differ"
}

func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ellipsis = "..."
	cut := max - len(ellipsis)
	// Back off to a rune boundary so the message stays valid UTF-8.
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + ellipsis
}
