package merge

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
)

// fieldConflict records that some exports differ from the oldest on a whole-Service field.
type fieldConflict struct {
	field string
	// winning and values[cluster] are empty when the values are too bulky to quote.
	winning string
	values  map[string]string
	// dissenters are the clusters whose value differs from the oldest's, ascending.
	dissenters []string
}

// scalarField is a property that cannot be merged: the oldest export's value is used.
type scalarField struct {
	reason mcsv1beta1.ServiceExportConditionReason
	field  string
	equal  func(a, b *Record) bool
	// show renders a value for condition messages; nil means "do not quote values".
	show func(r *Record) string
}

var scalarFields = []scalarField{
	{
		reason: mcsv1beta1.ServiceExportReasonTypeConflict,
		field:  "type",
		equal:  func(a, b *Record) bool { return a.Type == b.Type },
		show:   func(r *Record) string { return strconv.Quote(string(r.Type)) },
	},
	{
		reason: mcsv1beta1.ServiceExportReasonSessionAffinityConflict,
		field:  "sessionAffinity",
		equal: func(a, b *Record) bool {
			return effectiveAffinity(a.SessionAffinity) == effectiveAffinity(b.SessionAffinity)
		},
		show: func(r *Record) string { return strconv.Quote(string(effectiveAffinity(r.SessionAffinity))) },
	},
	{
		reason: mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict,
		field:  "sessionAffinityConfig",
		equal: func(a, b *Record) bool {
			ta, tb := affinityTimeout(a.SessionAffinityConfig), affinityTimeout(b.SessionAffinityConfig)
			return (ta == nil) == (tb == nil) && (ta == nil || *ta == *tb)
		},
		show: func(r *Record) string {
			if t := affinityTimeout(r.SessionAffinityConfig); t != nil {
				return "clientIP.timeoutSeconds=" + strconv.Itoa(int(*t))
			}
			return "unset"
		},
	},
	{
		reason: mcsv1beta1.ServiceExportReasonLabelsConflict,
		field:  "exportedLabels",
		equal:  func(a, b *Record) bool { return maps.Equal(a.ExportedLabels, b.ExportedLabels) },
	},
	{
		reason: mcsv1beta1.ServiceExportReasonAnnotationsConflict,
		field:  "exportedAnnotations",
		equal:  func(a, b *Record) bool { return maps.Equal(a.ExportedAnnotations, b.ExportedAnnotations) },
	},
	{
		reason: mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict,
		field:  "internalTrafficPolicy",
		equal: func(a, b *Record) bool {
			return effectiveTrafficPolicy(a.InternalTrafficPolicy) == effectiveTrafficPolicy(b.InternalTrafficPolicy)
		},
		show: func(r *Record) string { return strconv.Quote(string(effectiveTrafficPolicy(r.InternalTrafficPolicy))) },
	},
	{
		reason: mcsv1beta1.ServiceExportReasonTrafficDistributionConflict,
		field:  "trafficDistribution",
		equal: func(a, b *Record) bool {
			return stringOrEmpty(a.TrafficDistribution) == stringOrEmpty(b.TrafficDistribution)
		},
		show: func(r *Record) string {
			if v := stringOrEmpty(r.TrafficDistribution); v != "" {
				return strconv.Quote(v)
			}
			return "unset"
		},
	},
	{
		reason: ReasonClusterTrafficDistributionConflict,
		field:  "annotation " + v1alpha1.AnnotationTrafficDistribution,
		equal: func(a, b *Record) bool {
			return stringOrEmpty(a.ClusterTrafficDistribution) == stringOrEmpty(b.ClusterTrafficDistribution)
		},
		show: func(r *Record) string {
			if v := stringOrEmpty(r.ClusterTrafficDistribution); v != "" {
				return strconv.Quote(v)
			}
			return "unset"
		},
	},
	{
		reason: ReasonClusterSelectorsConflict,
		field:  "annotation " + v1alpha1.AnnotationClusterSelectors,
		equal:  func(a, b *Record) bool { return clusterselect.Equal(a.ClusterSelectors, b.ClusterSelectors) },
		show:   showSelectors,
	},
	{
		reason: mcsv1beta1.ServiceExportReasonIPFamilyConflict,
		field:  "ipFamilies",
		equal: func(a, b *Record) bool {
			return slices.Equal(familySet(a.IPFamilies), familySet(b.IPFamilies))
		},
		show: func(r *Record) string {
			if len(r.IPFamilies) == 0 {
				return "unset"
			}
			names := make([]string, len(r.IPFamilies))
			for i, f := range r.IPFamilies {
				names[i] = string(f)
			}
			return "[" + strings.Join(names, ",") + "]"
		},
	},
}

// familySet ignores order: a dual-stack Service reaches every backend over either family
// whichever family is primary, so only the set decides who can be reached.
func familySet(families []corev1.IPFamily) []corev1.IPFamily {
	set := slices.Clone(families)
	slices.Sort(set)
	return slices.Compact(set)
}

// findFieldConflicts compares every export with the oldest (ordered[0]) field by field.
func findFieldConflicts(ordered []*Record) map[mcsv1beta1.ServiceExportConditionReason]*fieldConflict {
	conflicts := map[mcsv1beta1.ServiceExportConditionReason]*fieldConflict{}
	oldest := ordered[0]
	for _, field := range scalarFields {
		var found *fieldConflict
		for _, record := range ordered[1:] {
			if field.equal(oldest, record) {
				continue
			}
			if found == nil {
				found = &fieldConflict{field: field.field, values: map[string]string{}}
				if field.show != nil {
					found.winning = field.show(oldest)
				}
			}
			found.dissenters = append(found.dissenters, record.ClusterID)
			if field.show != nil {
				found.values[record.ClusterID] = field.show(record)
			}
		}
		if found != nil {
			slices.Sort(found.dissenters)
			conflicts[field.reason] = found
		}
	}
	return conflicts
}

func conflictReasons(portConflict bool, fields map[mcsv1beta1.ServiceExportConditionReason]*fieldConflict) []mcsv1beta1.ServiceExportConditionReason {
	var reasons []mcsv1beta1.ServiceExportConditionReason
	for _, reason := range ConflictReasonOrder {
		if reason == mcsv1beta1.ServiceExportReasonPortConflict {
			if portConflict {
				reasons = append(reasons, reason)
			}
			continue
		}
		if fields[reason] != nil {
			reasons = append(reasons, reason)
		}
	}
	return reasons
}

// maxShownSelectors is how long a list of selectors may be to be quoted in a condition message;
// a longer one is described by its length.
const maxShownSelectors = 200

func showSelectors(r *Record) string {
	switch v := clusterselect.Format(r.ClusterSelectors); {
	case v == "":
		return "unset"
	case len(v) <= maxShownSelectors:
		return v
	default:
		return strconv.Itoa(len(r.ClusterSelectors)) + " selectors"
	}
}
