package endpoints

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/utils/net"
	"k8s.io/utils/ptr"
)

// podAddresses returns the Pod's addresses of one family, normalised the way
// the API server's sloppy parser reads them (so "010.0.0.1" is "10.0.0.1").
// Like upstream it reads status.podIPs only; status.podIP is just its first
// element.
//
// Deviation: upstream turns an unparseable IP into the address "<nil>" of the
// IPv4 set, which the API server then rejects; we skip such an IP.
func podAddresses(pod *Pod, addressType discoveryv1.AddressType) []string {
	var addresses []string
	for _, podIP := range pod.IPs {
		ip := utilnet.ParseIPSloppy(podIP)
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

// podEndpoint builds the endpoint of pod with the given addresses. node may be
// nil (publishNotReadyAddresses keeps Pods whose Node is unknown).
func podEndpoint(pod *Pod, node *corev1.Node, svc *corev1.Service, addresses []string) discoveryv1.Endpoint {
	serving := pod.Ready
	terminating := pod.Terminating
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
	if pod.NodeName != "" {
		ep.NodeName = ptr.To(pod.NodeName)
	}
	if node != nil {
		if zone := node.Labels[corev1.LabelTopologyZone]; zone != "" {
			ep.Zone = ptr.To(zone)
		}
	}
	// DNS publishes <hostname>.<subdomain>.<ns>.svc only for the Service named
	// by the subdomain, so the hostname means nothing on any other Service.
	if pod.Hostname != "" && pod.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		ep.Hostname = ptr.To(pod.Hostname)
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
func resolvePorts(svc *corev1.Service, pod *Pod, into []int64) []int64 {
	into = into[:0]
	for i := range svc.Spec.Ports {
		into = append(into, resolvePort(pod, &svc.Spec.Ports[i]))
	}
	return into
}

func resolvePort(pod *Pod, sp *corev1.ServicePort) int64 {
	if sp.TargetPort.Type == intstr.Int {
		return int64(sp.TargetPort.IntVal)
	}
	for _, cp := range pod.Ports {
		if cp.Name == sp.TargetPort.StrVal && cp.Protocol == sp.Protocol {
			return int64(cp.Number)
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
