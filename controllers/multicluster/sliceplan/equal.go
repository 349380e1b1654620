package sliceplan

import (
	"maps"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// SameContent reports whether two slices carry the same managed content. Endpoints and ports
// are compared field by field: reflection-based equality cost 25 ms for 3,000 unchanged
// endpoints, and every import reconcile compares all of a Service's slices.
//
// Endpoints are compared by endpoints.EndpointsEqual, the EndpointSlice controller's own
// comparison, plus their hints (imported slices carry the exporting cluster's hints, so a hint
// change is a change here). One comparison for both controllers means they agree on what a
// change is; in particular a targetRef's resourceVersion is not one (see EndpointsEqual).
func SameContent(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType == b.AddressType &&
		maps.Equal(a.Labels, b.Labels) &&
		maps.Equal(a.Annotations, b.Annotations) &&
		equality.Semantic.DeepEqual(a.OwnerReferences, b.OwnerReferences) &&
		slices.EqualFunc(a.Endpoints, b.Endpoints, func(x, y discoveryv1.Endpoint) bool {
			return endpoints.EndpointsEqual(x, y) && endpoints.HintsEqual(x.Hints, y.Hints)
		}) &&
		slices.EqualFunc(a.Ports, b.Ports, samePort)
}

func samePort(a, b discoveryv1.EndpointPort) bool {
	return samePtr(a.Name, b.Name) && samePtr(a.Protocol, b.Protocol) &&
		samePtr(a.Port, b.Port) && samePtr(a.AppProtocol, b.AppProtocol)
}

func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
