package endpoints

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/utils/net"
	"k8s.io/utils/ptr"
)

// PodIsCandidate reports whether a Pod may be an endpoint of any Service at all:
// a change between two versions of a Pod of which neither is a candidate (a
// Pod created, scheduled or deleted before it had an IP) cannot change a
// slice, so the reconciler does not sync for it.
func PodIsCandidate(pod *corev1.Pod) bool { return pod != nil && podIsCandidate(pod) }

// podIsCandidate reports whether a Pod may be an endpoint at all. Terminating
// Pods stay (consumers fall back to them while nothing else is ready); Pods in
// a terminal phase never run again, and Pods without an IP cannot be reached.
func podIsCandidate(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0
}

// podAddresses returns the Pod's addresses of one family, normalised the way
// the API server's sloppy parser reads them (so "010.0.0.1" is "10.0.0.1").
// Like upstream it reads status.podIPs only; status.podIP is just its first
// element.
//
// Deviation: upstream turns an unparseable IP into the address "<nil>" of the
// IPv4 set, which the API server then rejects; we skip such an IP.
func podAddresses(status *corev1.PodStatus, addressType discoveryv1.AddressType) []string {
	var addresses []string
	for _, podIP := range status.PodIPs {
		ip := utilnet.ParseIPSloppy(podIP.IP)
		if ip == nil {
			continue
		}
		isIPv6 := utilnet.IsIPv6(ip)
		if (isIPv6 && addressType == discoveryv1.AddressTypeIPv6) ||
			(!isIPv6 && addressType == discoveryv1.AddressTypeIPv4) {
			addresses = append(addresses, ip.String())
		}
	}
	return addresses
}

// podIsReady reports whether the Pod's Ready condition is True.
func podIsReady(pod *corev1.Pod) bool {
	if c := podReadyCondition(pod); c != nil {
		return c.Status == corev1.ConditionTrue
	}
	return false
}

func podReadyCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// podEndpoint builds the endpoint of pod with the given addresses. node may be
// nil (publishNotReadyAddresses keeps Pods whose Node is unknown).
func podEndpoint(pod *corev1.Pod, node *corev1.Node, svc *corev1.Service, addresses []string) discoveryv1.Endpoint {
	serving := podIsReady(pod)
	terminating := pod.DeletionTimestamp != nil
	// A terminating Pod is never "ready" (old consumers read only ready), unless
	// the Service asks for every address to be published regardless.
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses: addresses,
		Conditions: discoveryv1.EndpointConditions{
			Ready:       &ready,
			Serving:     &serving,
			Terminating: &terminating,
		},
		TargetRef: &corev1.ObjectReference{
			Kind:      "Pod",
			Namespace: pod.Namespace,
			Name:      pod.Name,
			UID:       pod.UID,
		},
	}
	if pod.Spec.NodeName != "" {
		ep.NodeName = ptr.To(pod.Spec.NodeName)
	}
	if node != nil {
		if zone := node.Labels[corev1.LabelTopologyZone]; zone != "" {
			ep.Zone = ptr.To(zone)
		}
	}
	// DNS publishes <hostname>.<subdomain>.<ns>.svc only for the Service named
	// by the subdomain, so the hostname means nothing on any other Service.
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		ep.Hostname = ptr.To(pod.Spec.Hostname)
	}
	return ep
}

// unresolved marks a Service port the Pod does not expose. It lies outside
// the int32 range so that no targetPort number, however invalid, can look like
// it.
const unresolved int64 = math.MinInt64

// resolvePorts returns, for each of the Service's ports in order, the port
// number the Pod serves it on, or unresolved when a named targetPort matches
// none of the Pod's container ports. Such a Service port is left out of the
// Pod's port list, which puts the Pod into a different slice set, exactly as
// upstream does.
//
// A headless Service without ports has no port list at all.
func resolvePorts(svc *corev1.Service, pod *corev1.Pod, into []int64) []int64 {
	into = into[:0]
	for i := range svc.Spec.Ports {
		into = append(into, resolvePort(pod, &svc.Spec.Ports[i]))
	}
	return into
}

func resolvePort(pod *corev1.Pod, sp *corev1.ServicePort) int64 {
	if sp.TargetPort.Type == intstr.Int {
		return int64(sp.TargetPort.IntVal)
	}
	name := sp.TargetPort.StrVal
	for i := range pod.Spec.Containers {
		for _, cp := range pod.Spec.Containers[i].Ports {
			if cp.Name == name && cp.Protocol == sp.Protocol {
				return int64(cp.ContainerPort)
			}
		}
	}
	// Sidecars (init containers that keep running) serve traffic too.
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		for _, cp := range c.Ports {
			if cp.Name == name && cp.Protocol == sp.Protocol {
				return int64(cp.ContainerPort)
			}
		}
	}
	return unresolved
}

// endpointPorts turns resolved port numbers back into EndpointPorts, in the
// Service's order, skipping unresolved ones.
func endpointPorts(svc *corev1.Service, resolved []int64) []discoveryv1.EndpointPort {
	ports := make([]discoveryv1.EndpointPort, 0, len(resolved))
	for i, number := range resolved {
		if number == unresolved {
			continue
		}
		sp := &svc.Spec.Ports[i]
		ports = append(ports, discoveryv1.EndpointPort{
			Name:        ptr.To(sp.Name),
			Port:        ptr.To(int32(number)),
			Protocol:    ptr.To(sp.Protocol),
			AppProtocol: copyOptional(sp.AppProtocol),
		})
	}
	return ports
}

func copyOptional[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return ptr.To(*p)
}
