package importplan

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Spec returns the ServiceImport spec: the merged spec with this member's cluster IPs.
func Spec(merged mcsv1beta1.ServiceImportSpec, ips []string) mcsv1beta1.ServiceImportSpec {
	spec := *merged.DeepCopy()
	spec.IPs = nil
	if spec.Type == mcsv1beta1.ClusterSetIP && len(ips) > 0 {
		spec.IPs = slices.Clone(ips)
	}
	if spec.Ports == nil {
		spec.Ports = []mcsv1beta1.ServicePort{}
	}
	return spec
}

// Readiness is what the member knows about the materialised import.
type Readiness struct {
	Type mcsv1beta1.ServiceImportType
	// IPs are the ClusterSetIPs found so far.
	IPs []string
	// FamilyProblem is set when the cluster serves none of the import's IP families.
	FamilyProblem string
	// ServiceProblem is set when the derived Service could not be written for another reason.
	ServiceProblem string
	// LiveClusters counts the exporting clusters whose endpoints are imported.
	LiveClusters int
}

// ReadyCondition returns the ServiceImport's Ready condition as the mcs-api defines it.
func ReadyCondition(r Readiness, generation int64) metav1.Condition {
	cond := metav1.Condition{
		Type:               string(mcsv1beta1.ServiceImportConditionReady),
		Status:             metav1.ConditionTrue,
		Reason:             string(mcsv1beta1.ServiceImportReasonReady),
		ObservedGeneration: generation,
	}
	switch {
	case r.FamilyProblem != "":
		cond.Status = metav1.ConditionFalse
		cond.Reason = string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported)
		cond.Message = "The cluster serves none of the imported IP families: " + r.FamilyProblem
	case r.ServiceProblem != "":
		cond.Status = metav1.ConditionFalse
		cond.Reason = string(mcsv1beta1.ServiceImportReasonPending)
		cond.Message = "The derived Service could not be written: " + r.ServiceProblem
	case r.Type == mcsv1beta1.ClusterSetIP && len(r.IPs) == 0:
		cond.Status = metav1.ConditionFalse
		cond.Reason = string(mcsv1beta1.ServiceImportReasonPending)
		cond.Message = "Waiting for the derived Service's cluster IPs"
	case r.LiveClusters == 0:
		cond.Message = "Imported, but every exporting cluster has lost its lease: no endpoints"
	default:
		cond.Message = fmt.Sprintf("Imported from %d cluster(s)", r.LiveClusters)
	}
	return cond
}

// Status returns the ServiceImport status for the live clusters, starting from the existing
// status so that condition transition times survive, and reports whether it changed.
func Status(existing mcsv1beta1.ServiceImportStatus, liveClusters []string, slicesPresent bool, ready metav1.Condition) (mcsv1beta1.ServiceImportStatus, bool) {
	next := *existing.DeepCopy()
	next.Clusters = make([]mcsv1beta1.ClusterStatus, 0, len(liveClusters))
	for _, c := range liveClusters {
		next.Clusters = append(next.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	if len(next.Clusters) == 0 {
		next.Clusters = nil
	}
	next.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsAbsent
	if slicesPresent {
		next.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	}
	meta.SetStatusCondition(&next.Conditions, ready)
	return next, !equality.Semantic.DeepEqual(existing, next)
}
