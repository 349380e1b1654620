package sliceplan

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// SameContent reports whether two slices carry the same managed content. Endpoints and ports
// are compared field by field: reflection-based equality cost 25 ms for 3,000 unchanged
// endpoints, and every import reconcile compares all of a Service's slices.
func SameContent(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType &&
		maps.Equal(a.Labels, b.Labels) &&
		maps.Equal(a.Annotations, b.Annotations) &&
		equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		slices.EqualFunc(a.Endpoints, b.Endpoints, sameEndpoint) &&
		slices.EqualFunc(a.Ports, b.Ports, samePort)
}

func sameEndpoint(a, b discoveryv1.Endpoint) bool {
	return slices.Equal(a.Addresses, b.Addresses) &&
		samePtr(a.Conditions.Ready, b.Conditions.Ready) &&
		samePtr(a.Conditions.Serving, b.Conditions.Serving) &&
		samePtr(a.Conditions.Terminating, b.Conditions.Terminating) &&
		samePtr(a.Hostname, b.Hostname) &&
		samePtr(a.NodeName, b.NodeName) &&
		samePtr(a.Zone, b.Zone) &&
		sameTargetRef(a.TargetRef, b.TargetRef) &&
		maps.Equal(a.DeprecatedTopology, b.DeprecatedTopology) &&
		sameHints(a.Hints, b.Hints)
}

func samePort(a, b discoveryv1.EndpointPort) bool {
	return samePtr(a.Name, b.Name) && samePtr(a.Protocol, b.Protocol) &&
		samePtr(a.Port, b.Port) && samePtr(a.AppProtocol, b.AppProtocol)
}

func sameHints(a, b *discoveryv1.EndpointHints) bool {
	if a == nil || b == nil {
		return emptyHints(a) && emptyHints(b)
	}
	return slices.Equal(a.ForZones, b.ForZones) && slices.Equal(a.ForNodes, b.ForNodes)
}

func emptyHints(h *discoveryv1.EndpointHints) bool {
	return h == nil || (len(h.ForZones) == 0 && len(h.ForNodes) == 0)
}

func sameTargetRef(a, b *corev1.ObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
