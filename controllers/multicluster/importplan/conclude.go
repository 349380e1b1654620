package importplan

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
)

// DerivedOutcome is how the derived Service's writes ended.
type DerivedOutcome struct {
	// Service is the derived Service as it stands after the writes; nil when there is none.
	Service *corev1.Service
	// FamilyProblem is set when the cluster serves none of the import's IP families;
	// ServiceProblem when the API refused the Service for another reason.
	FamilyProblem, ServiceProblem string
}

// StatusWrite is the ServiceImport's status to write, and what is announced once it has
// landed (so that a retried write announces nothing twice).
type StatusWrite struct {
	Status   mcsv1beta1.ServiceImportStatus
	Announce []Event
}

// Event is one event on the ServiceImport.
type Event struct {
	Type, Reason, Action, Message string
}

// Event reasons of cluster losses, the transitions a user acts on. A cluster joining an import
// gets none, as a created import gets none: the status names it, and at ten members starting
// together an event per arrival was the bulk of a member's writes.
const (
	ReasonClusterWithdrawn  = "ClusterWithdrawn"
	ReasonClusterUnexported = "ClusterUnexported"
)

// ImportSpec returns the ServiceImport's spec when it differs from si's (new ClusterSetIPs),
// decided from how the derived Service's writes ended; nil when it stands.
func (s Sync) ImportSpec(si *mcsv1beta1.ServiceImport, out DerivedOutcome) *mcsv1beta1.ServiceImportSpec {
	want := Spec(s.merged.Spec, ClusterSetIPs(out.Service))
	if equality.Semantic.DeepEqual(si.Spec, want) {
		return nil
	}
	return &want
}

// ImportStatus returns the status of si (as it stands after the spec write, whose generation
// the Ready condition observes) when it differs; nil when it stands.
func (s Sync) ImportStatus(si *mcsv1beta1.ServiceImport, out DerivedOutcome) *StatusWrite {
	readiness := Readiness{
		Type:           s.merged.Spec.Type,
		LiveClusters:   len(s.merged.Clusters),
		IPs:            ClusterSetIPs(out.Service),
		FamilyProblem:  out.FamilyProblem,
		ServiceProblem: out.ServiceProblem,
	}
	status, _ := Status(si.Status, s.merged.Clusters, s.present, ReadyCondition(readiness, si.Generation))
	missing := s.selection.setCondition(&status, si.Status.Conditions, si.Generation)
	if equality.Semantic.DeepEqual(si.Status, status) {
		return nil
	}
	return &StatusWrite{Status: status, Announce: append(lostClusters(statusClusters(si), s.merged.Clusters, s.records), missing...)}
}

// lostClusters returns one event per kind of loss among the import's exporting clusters
// (withdrawn: its Lease lapsed; unexported), each naming every cluster concerned.
func lostClusters(before, live []string, records []merge.Record) []Event {
	var withdrawn, unexported []string
	for _, c := range before {
		switch {
		case slices.Contains(live, c):
		case slices.ContainsFunc(records, func(rec merge.Record) bool { return rec.ClusterID == c }):
			withdrawn = append(withdrawn, c)
		default:
			unexported = append(unexported, c)
		}
	}
	var out []Event
	if len(withdrawn) > 0 {
		out = append(out, Event{corev1.EventTypeWarning, ReasonClusterWithdrawn, "Withdraw",
			"The Lease in the broker of " + clusterNames(withdrawn) + " has lapsed: endpoints withdrawn until it is renewed"})
	}
	if len(unexported) > 0 {
		out = append(out, Event{corev1.EventTypeNormal, ReasonClusterUnexported, "Withdraw", "No longer exported by " + clusterNames(unexported)})
	}
	return out
}

// clusterNames reads "cluster a" or "clusters a, b".
func clusterNames(ids []string) string {
	if len(ids) == 1 {
		return "cluster " + ids[0]
	}
	return "clusters " + strings.Join(ids, ", ")
}

func statusClusters(si *mcsv1beta1.ServiceImport) []string {
	out := make([]string, 0, len(si.Status.Clusters))
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}
