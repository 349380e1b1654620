package statusview

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SummariseAnswers counts where requests were answered, by cluster and then by zone: "20 sent:
// cluster-2 95% (zone-a 60%, zone-b 35%), cluster-1 5% (zone-a 5%)". An answer names its zone and
// Node as the samples' servers do ("... zone=Z node=N"); clusterOf maps a Node to its cluster.
// Empty answers are requests nobody answered.
func SummariseAnswers(answers []string, clusterOf func(node string) string) string {
	if len(answers) == 0 {
		return ""
	}
	byCluster := map[string]map[string]int{}
	unanswered, unknown := 0, 0
	for _, a := range answers {
		if strings.TrimSpace(a) == "" {
			unanswered++
			continue
		}
		zone, node := field(a, "zone"), field(a, "node")
		cluster := clusterOf(node)
		if cluster == "" {
			unknown++
			continue
		}
		if byCluster[cluster] == nil {
			byCluster[cluster] = map[string]int{}
		}
		byCluster[cluster][cmp.Or(zone, "?")]++
	}
	total := len(answers)
	total100 := func(n int) string { return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(total)) }
	sum := func(zones map[string]int) int {
		n := 0
		for _, v := range zones {
			n += v
		}
		return n
	}
	clusters := slices.SortedFunc(maps.Keys(byCluster), func(a, b string) int {
		return cmp.Or(cmp.Compare(sum(byCluster[b]), sum(byCluster[a])), cmp.Compare(a, b))
	})
	parts := make([]string, 0, len(clusters)+2)
	for _, c := range clusters {
		zones := slices.Sorted(maps.Keys(byCluster[c]))
		zs := make([]string, 0, len(zones))
		for _, z := range zones {
			zs = append(zs, z+" "+total100(byCluster[c][z]))
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", c, total100(sum(byCluster[c])), strings.Join(zs, ", ")))
	}
	if unknown > 0 {
		parts = append(parts, fmt.Sprintf("%s from no known Node", total100(unknown)))
	}
	if unanswered > 0 {
		parts = append(parts, fmt.Sprintf("%s unanswered", total100(unanswered)))
	}
	return fmt.Sprintf("%d sent: %s", total, strings.Join(parts, ", "))
}

// field finds key=value among the answer's words.
func field(answer, key string) string {
	for word := range strings.FieldsSeq(answer) {
		if v, ok := strings.CutPrefix(word, key+"="); ok {
			return v
		}
	}
	return ""
}
