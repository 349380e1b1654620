package importplan

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
)

// Cluster selection on the ServiceImport (KEP-5939). Until mcs-api has the fields, the merged
// selectors (spec.clusterSelectors) and this member's results (status.clusterSelectorResults)
// are annotations, and a condition says whether every member publishes the properties the
// selectors compare.
const (
	// ConditionClusterSelection is True (Resolved) when every member has the properties the
	// selectors compare, False (ClusterPropertyMissing) naming the members that lack one.
	ConditionClusterSelection = "ClusterSelection"
	ReasonSelectorsResolved   = "Resolved"
	// ReasonClusterPropertyMissing is also the reason of the Warning event that announces it.
	ReasonClusterPropertyMissing = "ClusterPropertyMissing"
)

// selection is what one import sync decides about cluster selectors.
type selection struct {
	selectors []v1alpha1.ClusterSelector
	// results are this member's, tiers every live member's (for the allocation), by name.
	results []clusterselect.Result
	tiers   map[string][][]string
	missing []clusterselect.MissingProperties
}

// planSelection evaluates the merged selectors for every live member as an importing cluster
// against the live exporters' ClusterProperties. Headless imports have none (the KEP excludes
// them; exports refuse them, this guards records from older members).
func planSelection(in Input, merged merge.Result) selection {
	if len(merged.ClusterSelectors) == 0 || merged.Spec.Type != mcsv1beta1.ClusterSetIP {
		return selection{}
	}
	s := selection{selectors: merged.ClusterSelectors, tiers: map[string][][]string{}}
	byName := map[string]clusterselect.Member{}
	var clients []clusterselect.Member
	for _, m := range in.Members {
		cm := clusterselect.Member{Name: m.Name, Properties: m.Properties}
		byName[m.Name] = cm
		clients = append(clients, cm)
	}
	exporters := make([]clusterselect.Member, 0, len(merged.Clusters))
	for _, c := range merged.Clusters {
		m, ok := byName[c]
		if !ok {
			m = clusterselect.Member{Name: c}
			clients = append(clients, m)
			byName[c] = m
		}
		exporters = append(exporters, m)
	}
	if _, ok := byName[in.Self]; !ok && in.Self != "" {
		clients = append(clients, clusterselect.Member{Name: in.Self})
	}
	for _, c := range clients {
		results := clusterselect.Evaluate(s.selectors, c, exporters)
		tiers := make([][]string, len(results))
		for i, r := range results {
			tiers[i] = r.Clusters
		}
		s.tiers[c.Name] = tiers
		if c.Name == in.Self {
			s.results = results
		}
	}
	s.missing = clusterselect.Missing(s.selectors, clients)
	return s
}

// annotations are the ServiceImport's: the exported ones, and the selectors and this member's
// results when there are selectors (they win over an exported annotation of the same name).
func (s selection) annotations(exported map[string]string) map[string]string {
	if len(s.selectors) == 0 {
		return exported
	}
	out := maps.Clone(exported)
	if out == nil {
		out = map[string]string{}
	}
	out[v1alpha1.AnnotationClusterSelectors] = clusterselect.Format(s.selectors)
	out[v1alpha1.AnnotationClusterSelectorResults] = clusterselect.FormatResults(s.results)
	return out
}

// condition is the ClusterSelection condition; nil without selectors.
func (s selection) condition(generation int64) *metav1.Condition {
	if len(s.selectors) == 0 {
		return nil
	}
	c := &metav1.Condition{Type: ConditionClusterSelection, Status: metav1.ConditionTrue, Reason: ReasonSelectorsResolved,
		ObservedGeneration: generation,
		Message: "Every member has the ClusterProperties the cluster selectors compare; this cluster's results are in annotation " +
			v1alpha1.AnnotationClusterSelectorResults}
	if len(s.missing) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonClusterPropertyMissing, missingMessage(s.missing)
	}
	return c
}

// maxNamed keeps the message short in a large fleet.
const maxNamed = 5

func missingMessage(missing []clusterselect.MissingProperties) string {
	parts := make([]string, 0, min(len(missing), maxNamed))
	for _, m := range missing[:min(len(missing), maxNamed)] {
		parts = append(parts, fmt.Sprintf("cluster %s lacks %s", m.Cluster, strings.Join(m.Keys, ", ")))
	}
	msg := strings.Join(parts, "; ")
	if extra := len(missing) - len(parts); extra > 0 {
		msg += fmt.Sprintf("; and %d more", extra)
	}
	return msg + ": the cluster selectors compare these ClusterProperties, so such a cluster is in no selector's result " +
		"(it is reached only through the last tier, all clusters) and, as a client, has no tier its own value selects"
}

// setCondition applies the selection condition to a status and returns the event announcing a
// new or changed ClusterPropertyMissing, if any.
func (s selection) setCondition(status *mcsv1beta1.ServiceImportStatus, before []metav1.Condition, generation int64) []Event {
	c := s.condition(generation)
	if c == nil {
		meta.RemoveStatusCondition(&status.Conditions, ConditionClusterSelection)
		return nil
	}
	meta.SetStatusCondition(&status.Conditions, *c)
	old := meta.FindStatusCondition(before, ConditionClusterSelection)
	if c.Status == metav1.ConditionFalse && (old == nil || old.Status != c.Status || old.Message != c.Message) {
		return []Event{{corev1.EventTypeWarning, ReasonClusterPropertyMissing, "Select", c.Message}}
	}
	return nil
}
