package agent

import (
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
)

// TrimObject is the agent's cache transform: every object keeps only what the agent's decisions
// and event handlers read (docs/agent.md, "Memory"), so an informer's copy is the only one and a
// small one. What each kind keeps:
//
//   - Service: name, namespace, resourceVersion, the multicluster service-name label and owner
//     references (which bind a derived Service to its ServiceImport), the cluster-allocation
//     annotation; type, cluster IPs, ports (name,
//     protocol, port, node port), session affinity and its timeout, both traffic policies,
//     external IPs and load-balancer ingress (whether it has any makes it externally accessible).
//   - EndpointSlice: name, namespace, resourceVersion, the service-name and source-cluster labels,
//     the last-change-trigger-time annotation; address type, ports; per endpoint its first address
//     (the only one kube-proxy and the agent use), conditions, node, zone and hints. Node and zone
//     names, hints and condition values are shared between endpoints rather than held once each.
//   - Node: name, resourceVersion and the zone label.
//   - ServiceImport: name, namespace, UID, resourceVersion, type and IPs.
//   - anything else: everything but managed fields.
//
// Objects it returns share strings and pointers with one another and must never be written
// through; the agent only reads them. Tombstones and objects already trimmed pass unchanged in
// meaning (trimming is idempotent, as client-go may apply a transform twice).
func TrimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return trimService(o), nil
	case *discoveryv1.EndpointSlice:
		return trimSlice(o), nil
	case *corev1.Node:
		return trimNode(o), nil
	case *mcsv1beta1.ServiceImport:
		return trimImport(o), nil
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

func trimService(svc *corev1.Service) *corev1.Service {
	out := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: svc.Name, Namespace: svc.Namespace, ResourceVersion: svc.ResourceVersion,
			Labels:          keep(svc.Labels, mcsv1beta1.LabelServiceName),
			OwnerReferences: svc.OwnerReferences,
			Annotations:     keep(svc.Annotations, allocation.Annotation),
		},
		Spec: corev1.ServiceSpec{
			Type:                  svc.Spec.Type,
			ClusterIP:             svc.Spec.ClusterIP,
			ClusterIPs:            svc.Spec.ClusterIPs,
			SessionAffinity:       svc.Spec.SessionAffinity,
			SessionAffinityConfig: svc.Spec.SessionAffinityConfig,
			InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
			ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
			ExternalIPs:           svc.Spec.ExternalIPs,
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: svc.Status.LoadBalancer.Ingress}},
	}
	if len(svc.Spec.Ports) > 0 {
		out.Spec.Ports = make([]corev1.ServicePort, len(svc.Spec.Ports))
		for i, p := range svc.Spec.Ports {
			out.Spec.Ports[i] = corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort}
		}
	}
	return out
}

func trimSlice(slice *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: slice.Name, Namespace: slice.Namespace, ResourceVersion: slice.ResourceVersion,
			Labels:      keep(slice.Labels, discoveryv1.LabelServiceName, mcsv1beta1.LabelSourceCluster),
			Annotations: keep(slice.Annotations, corev1.EndpointsLastChangeTriggerTime),
		},
		AddressType: slice.AddressType,
		Ports:       slice.Ports,
	}
	if len(slice.Endpoints) == 0 {
		return out
	}
	out.Endpoints = make([]discoveryv1.Endpoint, len(slice.Endpoints))
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		out.Endpoints[i] = discoveryv1.Endpoint{
			Addresses: ep.Addresses[:min(len(ep.Addresses), 1):min(len(ep.Addresses), 1)],
			Conditions: discoveryv1.EndpointConditions{
				Ready: sharedBool(ep.Conditions.Ready), Serving: sharedBool(ep.Conditions.Serving),
				Terminating: sharedBool(ep.Conditions.Terminating),
			},
			NodeName: shared.name(ep.NodeName),
			Zone:     shared.name(ep.Zone),
			Hints:    shared.hints(ep.Hints),
		}
	}
	return out
}

func trimNode(node *corev1.Node) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: node.Name, ResourceVersion: node.ResourceVersion, Labels: keep(node.Labels, ZoneLabel),
	}}
}

func trimImport(imp *mcsv1beta1.ServiceImport) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: imp.Name, Namespace: imp.Namespace, UID: imp.UID, ResourceVersion: imp.ResourceVersion},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: imp.Spec.Type, IPs: imp.Spec.IPs},
	}
}

// keep returns the entries of m under keys, nil when there are none.
func keep(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// The two values an endpoint condition can hold, shared by every trimmed endpoint.
var (
	conditionTrue  = true
	conditionFalse = false
)

func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &conditionTrue
	default:
		return &conditionFalse
	}
}

// maxShared bounds the names and hints held for sharing; past it the table starts over (the
// objects that point into it keep their values), so a cluster that renames Nodes endlessly
// cannot grow it.
const maxShared = 1 << 16

// sharing holds one copy of each Node name, zone and hint seen in EndpointSlices: a slice of a
// thousand endpoints on a hundred Nodes in three zones then holds a hundred names and three hint
// values instead of a thousand of each.
type sharing struct {
	mu    sync.Mutex
	names map[string]*string
	hint  map[string]*discoveryv1.EndpointHints
	key   []byte
}

var shared = &sharing{}

func (s *sharing) name(p *string) *string {
	if p == nil {
		return nil
	}
	if q, ok := s.names[*p]; ok {
		return q
	}
	if len(s.names) >= maxShared || s.names == nil {
		s.names = map[string]*string{}
	}
	v := *p
	s.names[v] = &v
	return &v
}

// hints returns the shared value equal to h, made of shared names.
func (s *sharing) hints(h *discoveryv1.EndpointHints) *discoveryv1.EndpointHints {
	if h == nil {
		return nil
	}
	// Each list is its nil-ness and length, then each name with its length: no two different
	// hints share a key, whatever their names hold.
	s.key = s.key[:0]
	s.writeList(h.ForZones == nil, len(h.ForZones), func(i int) string { return h.ForZones[i].Name })
	s.writeList(h.ForNodes == nil, len(h.ForNodes), func(i int) string { return h.ForNodes[i].Name })
	if v, ok := s.hint[string(s.key)]; ok {
		return v
	}
	if len(s.hint) >= maxShared || s.hint == nil {
		s.hint = map[string]*discoveryv1.EndpointHints{}
	}
	v := &discoveryv1.EndpointHints{}
	if h.ForZones != nil {
		v.ForZones = make([]discoveryv1.ForZone, len(h.ForZones))
		for i, z := range h.ForZones {
			v.ForZones[i].Name = *s.name(&z.Name)
		}
	}
	if h.ForNodes != nil {
		v.ForNodes = make([]discoveryv1.ForNode, len(h.ForNodes))
		for i, n := range h.ForNodes {
			v.ForNodes[i].Name = *s.name(&n.Name)
		}
	}
	s.hint[string(s.key)] = v
	return v
}

func (s *sharing) writeList(isNil bool, n int, name func(int) string) {
	if isNil {
		s.key = append(s.key, "-;"...)
		return
	}
	s.key = append(strconv.AppendInt(s.key, int64(n), 10), ';')
	for i := range n {
		v := name(i)
		s.key = append(append(strconv.AppendInt(s.key, int64(len(v)), 10), ':'), v...)
	}
}
