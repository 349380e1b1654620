package builders

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ImportManagedBy is the managed-by value of the slices the multi-cluster controllers write
// (sliceplan.ManagedBy). It is repeated rather than imported so that this package imports no
// fleetslice package: then every package's own tests, sliceplan's included, can use it without
// an import cycle. TestImportManagedByIsSliceplans keeps the two equal.
const ImportManagedBy = "mcs-controller.fleetslice.io"

// EndpointSliceWrapper builds an EndpointSlice, plain or imported.
type EndpointSliceWrapper struct{ discoveryv1.EndpointSlice }

// MakeEndpointSlice returns an IPv4 EndpointSlice with no labels, ports or endpoints. The
// address type is the one field the API server requires that every test agrees on.
func MakeEndpointSlice(namespace, name string) *EndpointSliceWrapper {
	return &EndpointSliceWrapper{discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		AddressType: discoveryv1.AddressTypeIPv4,
	}}
}

// MakeImportedSlice returns an IPv4 slice labelled as the import controller labels the slices
// it writes into a member: the multi-cluster service name (when service is not empty), the
// source cluster, and fleetslice's managed-by value (ImportManagedBy). Readers that find slices by the derived Service's name need
// DerivedService as well.
func MakeImportedSlice(namespace, name, service, cluster string) *EndpointSliceWrapper {
	w := MakeEndpointSlice(namespace, name).
		Label(mcsv1beta1.LabelSourceCluster, cluster).
		ManagedBy(ImportManagedBy)
	if service != "" {
		w.Label(mcsv1beta1.LabelServiceName, service)
	}
	return w
}

// Obj returns the slice itself: later changes through w show in it.
func (w *EndpointSliceWrapper) Obj() *discoveryv1.EndpointSlice { return &w.EndpointSlice }

// Clone returns a deep copy, so one base can give several variants.
func (w *EndpointSliceWrapper) Clone() *EndpointSliceWrapper {
	return &EndpointSliceWrapper{*w.DeepCopy()}
}

// UID sets the UID, which delete preconditions carry.
func (w *EndpointSliceWrapper) UID(uid types.UID) *EndpointSliceWrapper {
	w.EndpointSlice.UID = uid
	return w
}

// Label sets one label.
func (w *EndpointSliceWrapper) Label(key, value string) *EndpointSliceWrapper {
	w.Labels = set(w.Labels, key, value)
	return w
}

// Annotation sets one annotation.
func (w *EndpointSliceWrapper) Annotation(key, value string) *EndpointSliceWrapper {
	w.Annotations = set(w.Annotations, key, value)
	return w
}

// Service sets the kubernetes.io/service-name label, by which proxies and controllers find a
// Service's slices.
func (w *EndpointSliceWrapper) Service(name string) *EndpointSliceWrapper {
	return w.Label(discoveryv1.LabelServiceName, name)
}

// DerivedService is Service for an imported slice: the import controller labels it with the
// derived Service's name so that proxies program it.
func (w *EndpointSliceWrapper) DerivedService(name string) *EndpointSliceWrapper {
	return w.Service(name)
}

// ManagedBy sets the endpointslice.kubernetes.io/managed-by label.
func (w *EndpointSliceWrapper) ManagedBy(manager string) *EndpointSliceWrapper {
	return w.Label(discoveryv1.LabelManagedBy, manager)
}

// AddressType sets the address type.
func (w *EndpointSliceWrapper) AddressType(t discoveryv1.AddressType) *EndpointSliceWrapper {
	w.EndpointSlice.AddressType = t
	return w
}

// Port appends a named TCP port.
func (w *EndpointSliceWrapper) Port(name string, port int32) *EndpointSliceWrapper {
	protocol := corev1.ProtocolTCP
	return w.Ports(discoveryv1.EndpointPort{Name: &name, Protocol: &protocol, Port: &port})
}

// Ports appends ports as given, for unnamed ports, other protocols or unset fields.
func (w *EndpointSliceWrapper) Ports(ports ...discoveryv1.EndpointPort) *EndpointSliceWrapper {
	w.EndpointSlice.Ports = append(w.EndpointSlice.Ports, ports...)
	return w
}

// Endpoints appends endpoints.
func (w *EndpointSliceWrapper) Endpoints(endpoints ...discoveryv1.Endpoint) *EndpointSliceWrapper {
	w.EndpointSlice.Endpoints = append(w.EndpointSlice.Endpoints, endpoints...)
	return w
}

// Owner appends an owner reference.
func (w *EndpointSliceWrapper) Owner(ref metav1.OwnerReference) *EndpointSliceWrapper {
	w.OwnerReferences = append(w.OwnerReferences, ref)
	return w
}

// EndpointWrapper builds one endpoint of an EndpointSlice.
type EndpointWrapper struct{ discoveryv1.Endpoint }

// MakeEndpoint returns an endpoint with the given addresses and every condition unset, which
// consumers read as ready (an unset condition is not the same as false).
func MakeEndpoint(addresses ...string) *EndpointWrapper {
	return &EndpointWrapper{discoveryv1.Endpoint{Addresses: addresses}}
}

// Obj returns a copy of the endpoint: slices hold endpoints by value.
func (w *EndpointWrapper) Obj() discoveryv1.Endpoint { return *w.DeepCopy() }

// Conditions sets all three conditions.
func (w *EndpointWrapper) Conditions(ready, serving, terminating bool) *EndpointWrapper {
	w.Endpoint.Conditions = discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}
	return w
}

// Ready sets the endpoint ready, serving and not terminating, as a Ready Pod gives it.
func (w *EndpointWrapper) Ready() *EndpointWrapper { return w.Conditions(true, true, false) }

// Node sets the Node name.
func (w *EndpointWrapper) Node(name string) *EndpointWrapper {
	w.NodeName = &name
	return w
}

// Zone sets the zone.
func (w *EndpointWrapper) Zone(zone string) *EndpointWrapper {
	w.Endpoint.Zone = &zone
	return w
}

// Hostname sets the hostname.
func (w *EndpointWrapper) Hostname(name string) *EndpointWrapper {
	w.Endpoint.Hostname = &name
	return w
}

// ZoneHints sets hints for the given zones, replacing any hints.
func (w *EndpointWrapper) ZoneHints(zones ...string) *EndpointWrapper {
	w.Hints = &discoveryv1.EndpointHints{}
	for _, z := range zones {
		w.Hints.ForZones = append(w.Hints.ForZones, discoveryv1.ForZone{Name: z})
	}
	return w
}

// TargetPod points the endpoint at a Pod, as the EndpointSlice controllers do.
func (w *EndpointWrapper) TargetPod(namespace, name string, uid types.UID) *EndpointWrapper {
	w.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: name, UID: uid}
	return w
}
