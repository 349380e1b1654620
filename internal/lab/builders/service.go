package builders

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServiceWrapper builds a Service.
type ServiceWrapper struct{ corev1.Service }

// MakeService returns a Service with no ports, no selector and no type: the API server
// defaults the type to ClusterIP and allocates its IPs.
func MakeService(namespace, name string) *ServiceWrapper {
	return &ServiceWrapper{corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// Obj returns the Service itself: later changes through w show in it.
func (w *ServiceWrapper) Obj() *corev1.Service { return &w.Service }

// Clone returns a deep copy, so one base can give several variants.
func (w *ServiceWrapper) Clone() *ServiceWrapper { return &ServiceWrapper{*w.DeepCopy()} }

// UID sets the UID, which owner references and slice names derive from in unit tests (the
// API server sets it on create).
func (w *ServiceWrapper) UID(uid types.UID) *ServiceWrapper {
	w.Service.UID = uid
	return w
}

// Label sets one label.
func (w *ServiceWrapper) Label(key, value string) *ServiceWrapper {
	w.Labels = set(w.Labels, key, value)
	return w
}

// Annotation sets one annotation.
func (w *ServiceWrapper) Annotation(key, value string) *ServiceWrapper {
	w.Annotations = set(w.Annotations, key, value)
	return w
}

// Owner appends an owner reference, as the import controller owns a derived Service by its
// ServiceImport.
func (w *ServiceWrapper) Owner(ref metav1.OwnerReference) *ServiceWrapper {
	w.OwnerReferences = append(w.OwnerReferences, ref)
	return w
}

// InternalTrafficPolicy sets spec.internalTrafficPolicy.
func (w *ServiceWrapper) InternalTrafficPolicy(p corev1.ServiceInternalTrafficPolicy) *ServiceWrapper {
	w.Spec.InternalTrafficPolicy = &p
	return w
}

// Selector adds one key to the Pod selector.
func (w *ServiceWrapper) Selector(key, value string) *ServiceWrapper {
	w.Spec.Selector = set(w.Spec.Selector, key, value)
	return w
}

// Port appends a TCP port. The protocol is explicit because a Service built for a unit test
// never meets the API server's defaulting; the server would set TCP all the same.
func (w *ServiceWrapper) Port(name string, port int32, target intstr.IntOrString) *ServiceWrapper {
	return w.ServicePort(corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP, TargetPort: target})
}

// ServicePort appends a port as given, for protocols and fields Port does not cover.
func (w *ServiceWrapper) ServicePort(p corev1.ServicePort) *ServiceWrapper {
	w.Spec.Ports = append(w.Spec.Ports, p)
	return w
}

// Type sets the Service type.
func (w *ServiceWrapper) Type(t corev1.ServiceType) *ServiceWrapper {
	w.Spec.Type = t
	return w
}

// ClusterIP sets spec.clusterIP to the first IP and spec.clusterIPs to all of them, as the API
// server allocates them; a unit test has no server to do it.
func (w *ServiceWrapper) ClusterIP(ips ...string) *ServiceWrapper {
	w.Spec.ClusterIP, w.Spec.ClusterIPs = "", nil
	if len(ips) > 0 {
		w.Spec.ClusterIP, w.Spec.ClusterIPs = ips[0], append([]string(nil), ips...)
	}
	return w
}

// Headless makes the Service headless (clusterIP None).
func (w *ServiceWrapper) Headless() *ServiceWrapper { return w.ClusterIP(corev1.ClusterIPNone) }

// IPFamilies sets spec.ipFamilies.
func (w *ServiceWrapper) IPFamilies(families ...corev1.IPFamily) *ServiceWrapper {
	w.Spec.IPFamilies = families
	return w
}

// set stores key=value in m, making m when it is nil, and returns it.
func set(m map[string]string, key, value string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}
