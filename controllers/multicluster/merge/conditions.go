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

// describeConflict builds the Conflict condition of cluster's export. The reasons are the
// same for every export of the Service; the message tells this cluster what happened to its
// own values and whose values are used instead.
func describeConflict(
	cluster string,
	oldest *Record,
	exports int,
	reasons []mcsv1beta1.ServiceExportConditionReason,
	losses []portLoss,
	fields map[mcsv1beta1.ServiceExportConditionReason]*fieldConflict,
) ClusterConflict {
	service := oldest.ServiceNamespace + "/" + oldest.ServiceName
	if len(reasons) == 0 {
		message := fmt.Sprintf("No conflicts among the %d exports of %s", exports, service)
		if exports == 1 {
			message = "No conflicts: this is the only export of " + service
		}
		return ClusterConflict{
			Cluster: cluster,
			Reason:  string(mcsv1beta1.ServiceExportReasonNoConflicts),
			Message: message,
		}
	}

	joined := make([]string, len(reasons))
	for i, r := range reasons {
		joined[i] = string(r)
	}

	clauses := make([]string, 0, len(reasons))
	for _, reason := range reasons {
		if reason == mcsv1beta1.ServiceExportReasonPortConflict {
			clauses = append(clauses, describePortConflict(cluster, losses))
			continue
		}
		clauses = append(clauses, describeFieldConflict(cluster, oldest.ClusterID, fields[reason]))
	}
	message := fmt.Sprintf("Exports of %s conflict; the oldest export (%s, exported %s) wins: %s",
		service, clusterRef(cluster, oldest.ClusterID), oldest.ExportCreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"),
		strings.Join(clauses, "; "))
	return ClusterConflict{
		Cluster:  cluster,
		Conflict: true,
		Reason:   strings.Join(joined, ","),
		Message:  truncate(message, maxMessageBytes),
	}
}

func describePortConflict(cluster string, losses []portLoss) string {
	var own []string
	var others []string
	seen := map[string]bool{}
	for _, loss := range losses {
		if loss.cluster == cluster {
			own = append(own, fmt.Sprintf("%s clashes with %s from %s, which is used",
				describePort(loss.port), describePort(loss.winner), clusterRef(cluster, loss.winnerCluster)))
			continue
		}
		if !seen[loss.cluster] {
			seen[loss.cluster] = true
			others = append(others, loss.cluster)
		}
	}
	if len(own) > 0 {
		return "ports: this export's " + limitList(own, messagePortLimit, ", ")
	}
	return fmt.Sprintf("ports: %s %s ports that clash with older exports' ports; those are left out",
		clusterList(others), hasOrHave(len(others)))
}

func describeFieldConflict(cluster, oldestCluster string, conflict *fieldConflict) string {
	winner := clusterRef(cluster, oldestCluster)
	own, differs := conflict.values[cluster], slices.Contains(conflict.dissenters, cluster)
	switch {
	case differs && conflict.winning != "":
		return fmt.Sprintf("%s: this export has %s, but %s from %s is used", conflict.field, own, conflict.winning, winner)
	case differs:
		return fmt.Sprintf("%s: this export's differ from those of %s, which are used", conflict.field, winner)
	case conflict.winning != "":
		return fmt.Sprintf("%s: %s from %s is used; %s", conflict.field, conflict.winning, winner, differing(conflict.dissenters))
	default:
		return fmt.Sprintf("%s: those of %s are used; %s", conflict.field, winner, differing(conflict.dissenters))
	}
}

// clusterRef names other, or says "this export" when the reader is that cluster.
func clusterRef(reader, other string) string {
	if reader == other {
		return "this export"
	}
	return "cluster " + strconv.Quote(other)
}

func clusterList(clusters []string) string {
	quoted := make([]string, len(clusters))
	for i, c := range clusters {
		quoted[i] = strconv.Quote(c)
	}
	noun := "clusters "
	if len(clusters) == 1 {
		noun = "cluster "
	}
	return noun + limitList(quoted, messageClusterLimit, ", ")
}

func limitList(items []string, limit int, sep string) string {
	if len(items) <= limit {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:limit], sep) + fmt.Sprintf(" and %d more", len(items)-limit)
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
