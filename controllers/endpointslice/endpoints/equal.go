package endpoints

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Identity says which endpoint an Endpoint value is, across syncs: two values
// with the same Identity describe the same endpoint, possibly with different
// content (conditions, zone, ...), and are updated in place rather than
// removed and re-added.
//
// It is the endpoint's sorted addresses plus its hostname and the namespace
// and name of the object it refers to, the same fields upstream hashes.
// Addresses alone are not enough: host-network Pods share their Node's IP, so
// during a rolling update of a host-network DaemonSet the old and the new Pod
// are two endpoints with one address, and upstream lists both. A new Pod that
// reuses a deleted Pod's IP is therefore a new endpoint (remove plus add),
// while a Pod recreated with the same name and IP keeps its identity and only
// its targetRef UID changes.
type Identity struct {
	// Addresses is the sorted addresses joined by commas (IP addresses and
	// host names never contain commas).
	Addresses string
	Hostname  string
	Namespace string
	Name      string
}

// IdentityOf returns ep's Identity. It does not modify ep.
func IdentityOf(ep *discoveryv1.Endpoint) Identity {
	var id Identity
	switch len(ep.Addresses) {
	case 0:
	case 1:
		id.Addresses = ep.Addresses[0]
	default:
		sorted := slices.Clone(ep.Addresses)
		slices.Sort(sorted)
		id.Addresses = strings.Join(sorted, ",")
	}
	if ep.Hostname != nil {
		id.Hostname = *ep.Hostname
	}
	if ep.TargetRef != nil {
		id.Namespace = ep.TargetRef.Namespace
		id.Name = ep.TargetRef.Name
	}
	return id
}

// EndpointsEqual reports whether a and b have the same content, so that
// replacing one by the other would not change what consumers see. It is the
// one Endpoint comparison in fleetslice: the EndpointSlice controller's
// placement decides with it whether a slice needs an update, and the
// multi-cluster controllers' sliceplan.SameContent whether an imported slice or
// broker copy does. Two comparisons had drifted apart on the targetRef's
// resourceVersion; one keeps the controllers agreeing on what a change is.
//
// It ignores Hints, which a separate topology decision sets (compare them
// with HintsEqual), and the targetRef's resourceVersion. That is decided, not
// left out: the resourceVersion changes on every write to the Pod (a status
// heartbeat, a label) while nothing a consumer reads changes, and no consumer
// (kube-proxy, the node agent, DNS) reads it. fleetslice's controller never
// sets it, but a slice another controller wrote may, and sliceplan copies a
// local slice's targetRefs into the imported slices: counting it would
// rewrite those for nothing. Not counting it misses no real change: the Pod a
// targetRef names (kind, namespace, name) and its UID, which changes when a
// Pod is recreated under the same name, still count. Upstream ignores it too.
//
// Every other field counts, including the order of addresses (only the first
// one is used by consumers) and deprecatedTopology. Unset and empty
// collections are equal, as they are after an API round trip.
func EndpointsEqual(a, b discoveryv1.Endpoint) bool {
	return slices.Equal(a.Addresses, b.Addresses) &&
		equalPointee(a.Conditions.Ready, b.Conditions.Ready) &&
		equalPointee(a.Conditions.Serving, b.Conditions.Serving) &&
		equalPointee(a.Conditions.Terminating, b.Conditions.Terminating) &&
		equalPointee(a.Hostname, b.Hostname) &&
		equalPointee(a.NodeName, b.NodeName) &&
		equalPointee(a.Zone, b.Zone) &&
		targetRefsEqual(a.TargetRef, b.TargetRef) &&
		maps.Equal(a.DeprecatedTopology, b.DeprecatedTopology)
}

// HintsEqual reports whether two endpoints' hints route traffic the same way:
// unset hints and hints naming no zone and no node are equal.
func HintsEqual(a, b *discoveryv1.EndpointHints) bool {
	if a == nil || b == nil {
		return (a == nil || len(a.ForZones)+len(a.ForNodes) == 0) && (b == nil || len(b.ForZones)+len(b.ForNodes) == 0)
	}
	return slices.Equal(a.ForZones, b.ForZones) && slices.Equal(a.ForNodes, b.ForNodes)
}

func targetRefsEqual(a, b *corev1.ObjectReference) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	x, y := *a, *b
	x.ResourceVersion, y.ResourceVersion = "", ""
	return x == y
}

func equalPointee[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
