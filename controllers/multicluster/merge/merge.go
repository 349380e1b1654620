// Package merge decides, without any client calls, what ServiceImport the exports of one
// Service across a ClusterSet add up to, and which exports conflict (KEP-1645).
//
// Rules:
//   - The oldest export (exportCreationTimestamp, ties broken by ascending cluster id) wins
//     every field that cannot simply be merged.
//   - Ports are the union of all exports' ports, merged by name first, then by protocol and
//     port number. A port clashing with an older one (same name but another protocol, number or
//     appProtocol; or another name but the same protocol and number) is dropped. Any export
//     whose port set is not the oldest's raises PortConflict, as the API defines it ("the
//     ports are not identical in all the constituent Services"): ports of different names and
//     numbers still add up, but each reaches only the clusters that export it.
//   - Type, sessionAffinity, sessionAffinityConfig, internalTrafficPolicy, trafficDistribution,
//     ipFamilies, exportedLabels and exportedAnnotations each raise their own reason when any
//     export differs from the oldest. Unset values compare equal to the API defaults (None
//     affinity, Cluster policy, TCP), and ipFamilies compare as sets: [IPv4, IPv6] and
//     [IPv6, IPv4] reach the same backends, so they do not conflict; the oldest's order is used.
//   - The ServiceExport annotation fleetslice.io/traffic-distribution (PreferSameCluster asks
//     that clients stay in their own cluster while its endpoints are within the overload
//     bound) merges the same way: the oldest export's value, compared as written (absent and
//     empty are one value), with ClusterTrafficDistributionConflict when exports differ. The
//     MCS API has no field for it, so it is carried in Result.ClusterTrafficDistribution.
//   - The ServiceExport annotation fleetslice.io/cluster-selectors (KEP-5939's ordered
//     clusterSelectors, package clusterselect) merges the same way: the oldest export's list,
//     compared selector by selector and in order (unset and empty are one value), with
//     ClusterSelectorsConflict when exports differ; carried in Result.ClusterSelectors.
//   - A conflicting field is reported on every export of the Service, the oldest included, as
//     KEP-1645 asks ("set on all ServiceExports for the conflicted service") and as the MCS
//     conformance suite checks. Every export therefore carries the same comma-joined reasons,
//     in the order of ConflictReasonOrder; only the message differs, telling each cluster
//     whether its own value lost and which cluster's value is used instead.
//
// Merge is deterministic: the same set of records gives the same Result in any input order.
package merge

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
)

// Record is one cluster's export of the Service, as published to the broker.
type Record = v1alpha1.ServiceExportRecordSpec

// ConflictReasonOrder is the fixed order in which conflict reasons are joined.
var ConflictReasonOrder = []mcsv1beta1.ServiceExportConditionReason{
	mcsv1beta1.ServiceExportReasonPortConflict,
	mcsv1beta1.ServiceExportReasonTypeConflict,
	mcsv1beta1.ServiceExportReasonSessionAffinityConflict,
	mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict,
	mcsv1beta1.ServiceExportReasonLabelsConflict,
	mcsv1beta1.ServiceExportReasonAnnotationsConflict,
	mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict,
	mcsv1beta1.ServiceExportReasonTrafficDistributionConflict,
	ReasonClusterTrafficDistributionConflict,
	ReasonClusterSelectorsConflict,
	mcsv1beta1.ServiceExportReasonIPFamilyConflict,
}

// ReasonClusterTrafficDistributionConflict is raised when exporters' fleetslice.io/traffic-distribution
// annotations differ. The MCS API defines no reason for a field it does not have, so the name
// follows its <Field>Conflict pattern.
const ReasonClusterTrafficDistributionConflict mcsv1beta1.ServiceExportConditionReason = "ClusterTrafficDistributionConflict"

// ReasonClusterSelectorsConflict is KEP-5939's reason for exporters whose cluster selectors
// differ (in any selector, or in their order).
const ReasonClusterSelectorsConflict mcsv1beta1.ServiceExportConditionReason = "ClusterSelectorsConflict"

// Result is the merged view of all exports of one Service.
type Result struct {
	// Spec is what every member's ServiceImport must agree on. IPs is left empty: each member
	// fills it from its own derived Service.
	Spec mcsv1beta1.ServiceImportSpec
	// Labels and Annotations are the oldest export's exportedLabels and exportedAnnotations.
	Labels      map[string]string
	Annotations map[string]string
	// ClusterTrafficDistribution is the oldest export's fleetslice.io/traffic-distribution
	// annotation, empty when it has none; see PrefersSameCluster.
	ClusterTrafficDistribution string
	// ClusterSelectors are the oldest export's cluster selectors (KEP-5939), nil for none.
	ClusterSelectors []v1alpha1.ClusterSelector
	// Clusters lists every exporting cluster once, ascending.
	Clusters []string
	// OldestCluster is the cluster whose export wins the conflicts.
	OldestCluster string
	// Reasons lists the conflicting properties in ConflictReasonOrder; empty without conflicts.
	Reasons []mcsv1beta1.ServiceExportConditionReason
	// Conflicts holds the Conflict condition of each cluster's export, one per cluster, in
	// the order of Clusters.
	Conflicts []ClusterConflict
	// DuplicateRecords counts records dropped because their cluster had published an older
	// (or, at equal age, canonically smaller) record for the same Service; normally zero.
	DuplicateRecords int
}

// ClusterConflict is the Conflict condition one cluster sets on its ServiceExport.
type ClusterConflict struct {
	Cluster  string
	Conflict bool
	// Reason is the comma-joined conflict reasons, or NoConflicts.
	Reason  string
	Message string
}

// Condition returns the ServiceExport Conflict condition. LastTransitionTime is left zero so
// that meta.SetStatusCondition stamps it only when the status really changes.
func (c ClusterConflict) Condition() metav1.Condition {
	status := metav1.ConditionFalse
	if c.Conflict {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{
		Type:    string(mcsv1beta1.ServiceExportConditionConflict),
		Status:  status,
		Reason:  c.Reason,
		Message: c.Message,
	}
}

// PrefersSameCluster reports whether the merged exports ask clients to stay in their own
// cluster. Any other value, including a misspelt one, means no preference: the Service then
// behaves as without the annotation rather than as something the user did not ask for.
func (r Result) PrefersSameCluster() bool {
	return r.ClusterTrafficDistribution == v1alpha1.PreferSameCluster
}

// ConflictFor returns the Conflict data of cluster's export, if that cluster exports.
func (r Result) ConflictFor(cluster string) (ClusterConflict, bool) {
	i, found := slices.BinarySearchFunc(r.Conflicts, cluster, func(c ClusterConflict, id string) int {
		return cmp.Compare(c.Cluster, id)
	})
	if !found {
		return ClusterConflict{}, false
	}
	return r.Conflicts[i], true
}

// Merge computes the ServiceImport of one Service from every cluster's record of it. The
// caller passes the records of a single namespace/name; an empty input gives an empty Result
// (no cluster exports, so no ServiceImport should exist).
func Merge(records []Record) Result {
	ordered, duplicates := oldestFirst(records)
	if len(ordered) == 0 {
		return Result{}
	}
	oldest := ordered[0]
	result := Result{
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:                  oldest.Type,
			SessionAffinity:       oldest.SessionAffinity,
			SessionAffinityConfig: oldest.SessionAffinityConfig.DeepCopy(),
			IPFamilies:            nilIfEmpty(slices.Clone(oldest.IPFamilies)),
			InternalTrafficPolicy: clonePointer(oldest.InternalTrafficPolicy),
			TrafficDistribution:   clonePointer(oldest.TrafficDistribution),
		},
		Labels:                     cloneNonEmptyMap(oldest.ExportedLabels),
		Annotations:                cloneNonEmptyMap(oldest.ExportedAnnotations),
		ClusterTrafficDistribution: stringOrEmpty(oldest.ClusterTrafficDistribution),
		ClusterSelectors:           clusterselect.Clone(oldest.ClusterSelectors),
		OldestCluster:              oldest.ClusterID,
		DuplicateRecords:           duplicates,
	}

	ports := unitePorts(ordered)
	result.Spec.Ports = ports.merged
	if result.Spec.Ports == nil {
		// The ServiceImport schema requires the ports field to be present.
		result.Spec.Ports = []mcsv1beta1.ServicePort{}
	}

	fieldConflicts := findFieldConflicts(ordered)
	result.Reasons = conflictReasons(ports.conflict(), fieldConflicts)

	result.Clusters = make([]string, len(ordered))
	for i := range ordered {
		result.Clusters[i] = ordered[i].ClusterID
	}
	slices.Sort(result.Clusters)

	describer := newConflictDescriber(oldest, result.Reasons, ports, fieldConflicts)
	result.Conflicts = make([]ClusterConflict, len(result.Clusters))
	for i, cluster := range result.Clusters {
		result.Conflicts[i] = describer.describe(cluster)
	}
	return result
}

// oldestFirst keeps one record per cluster and sorts them oldest first, ties broken by
// cluster id, so that the winner never depends on the order the records were listed in.
func oldestFirst(records []Record) ([]*Record, int) {
	byCluster := make(map[string]*Record, len(records))
	duplicates := 0
	for i := range records {
		record := &records[i]
		kept, seen := byCluster[record.ClusterID]
		if !seen {
			byCluster[record.ClusterID] = record
			continue
		}
		duplicates++
		if compareDuplicates(record, kept) < 0 {
			byCluster[record.ClusterID] = record
		}
	}
	ordered := slices.Collect(maps.Values(byCluster))
	slices.SortFunc(ordered, compareAge)
	return ordered, duplicates
}

func compareAge(a, b *Record) int {
	if c := a.ExportCreationTimestamp.Time.Compare(b.ExportCreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Compare(a.ClusterID, b.ClusterID)
}

// compareDuplicates orders two records of the same cluster: the older wins, and at equal age
// the canonical JSON encoding decides, which only matters for input that should not exist.
func compareDuplicates(a, b *Record) int {
	if c := compareAge(a, b); c != 0 {
		return c
	}
	return strings.Compare(canonicalJSON(a), canonicalJSON(b))
}

func canonicalJSON(r *Record) string {
	encoded, err := json.Marshal(r)
	if err != nil {
		// A spec of plain strings, numbers and maps always encodes; keep a total order anyway.
		return ""
	}
	return string(encoded)
}

// nilIfEmpty and cloneNonEmptyMap make "unset" and "empty" one value in the Result: they
// encode the same way, so two records differing only there must not give different Results.
func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func cloneNonEmptyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func clonePointer[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Effective values: what an unset field means once the API server has applied its defaults.

func effectiveAffinity(a corev1.ServiceAffinity) corev1.ServiceAffinity {
	if a == "" {
		return corev1.ServiceAffinityNone
	}
	return a
}

func effectiveProtocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func effectiveTrafficPolicy(p *corev1.ServiceInternalTrafficPolicy) corev1.ServiceInternalTrafficPolicy {
	if p == nil || *p == "" {
		return corev1.ServiceInternalTrafficPolicyCluster
	}
	return *p
}

func stringOrEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// affinityTimeout is the only content of a SessionAffinityConfig; nil means "not set".
func affinityTimeout(c *corev1.SessionAffinityConfig) *int32 {
	if c == nil || c.ClientIP == nil {
		return nil
	}
	return c.ClientIP.TimeoutSeconds
}
