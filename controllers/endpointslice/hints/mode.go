// Package hints decides the zone (and node) hints of a Service's endpoints: the topology mode
// the Service asks for, the zones CPU-proportional hints divide traffic between, and, per address
// type, the hints each endpoint must carry and why. It is the EndpointSlice controller's decision,
// kept apart from its reconciler so that tools explaining a decision (internal/ops/explain) re-run
// this very code rather than a copy that drifts, without linking a client.
//
// Everything here is pure: no clients, no clocks, no global state, and inputs are never modified.
package hints

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Annotations that opt a Service into CPU-proportional hints, as upstream reads them.
const (
	AnnotationTopologyMode = "service.kubernetes.io/topology-mode"
	// AnnotationTopologyAwareHints is the deprecated spelling, still honoured.
	AnnotationTopologyAwareHints = "service.kubernetes.io/topology-aware-hints"
)

// Mode is how a Service's endpoints get hints.
type Mode string

const (
	// None: no hints; any an endpoint carries are removed.
	None Mode = "None"
	// Auto: CPU-proportional zone hints (topology.Allocate), from the topology-mode annotation.
	Auto Mode = "Auto"
	// PreferSameZone: each ready endpoint is hinted for its own zone (trafficDistribution
	// PreferClose or PreferSameZone).
	PreferSameZone Mode = "PreferSameZone"
	// PreferSameNode: as PreferSameZone, plus a hint for the endpoint's own Node.
	PreferSameNode Mode = "PreferSameNode"
)

// ReasonDisabled is the decision's reason when the Service asks for no hints.
const ReasonDisabled = "TopologyModeDisabled"

// sourceNone is what sets None; a constant, so the controller's most common case builds no string.
const sourceNone = "neither annotation " + AnnotationTopologyMode + "=Auto nor spec.trafficDistribution"

// ModeOf reads a Service's topology mode and says what set it (an annotation or
// spec.trafficDistribution), for a person asking why. The annotation set to Auto wins over
// spec.trafficDistribution, as upstream decides.
func ModeOf(svc *corev1.Service) (mode Mode, source string) {
	for _, key := range []string{AnnotationTopologyMode, AnnotationTopologyAwareHints} {
		if v, ok := svc.Annotations[key]; ok && strings.EqualFold(v, "auto") {
			return Auto, "annotation " + key + "=" + v
		}
	}
	if td := svc.Spec.TrafficDistribution; td != nil {
		switch *td {
		case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone:
			return PreferSameZone, "spec.trafficDistribution=" + *td
		case corev1.ServiceTrafficDistributionPreferSameNode:
			return PreferSameNode, "spec.trafficDistribution=" + *td
		}
	}
	return None, sourceNone
}
