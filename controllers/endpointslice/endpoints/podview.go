package endpoints

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod is what endpoints are built from: the facts of a corev1.Pod that Build
// and LastChangeTriggerTime read, and nothing else. A manager
// keeps one for every Pod of its cluster, so it holds those facts in their
// smallest form (a Pod object is over 1 KB before any of its containers);
// PodOf makes one from a Pod. Which Services select the Pod (its labels) is
// the caller's business, as for Build.
type Pod struct {
	Namespace, Name string
	UID             types.UID
	// NodeName, Hostname and Subdomain are the spec's.
	NodeName, Hostname, Subdomain string
	// IPs is status.podIPs (status.podIP is only its first element).
	IPs []string
	// Ports are the ports of the containers, then those of restartable init
	// containers (sidecars), in the Pod's order: a named targetPort resolves
	// to the first with its name and protocol.
	Ports []Port
	// ReadyTransition is the Ready condition's lastTransitionTime: zero
	// without one.
	ReadyTransition time.Time
	// Ready: the Ready condition is True.
	Ready bool
	// Terminating: the Pod has a deletion timestamp.
	Terminating bool
	// Candidate: the Pod may be an endpoint at all (podIsCandidate). A change
	// between two versions of a Pod of which neither is a candidate (a Pod
	// created, scheduled or deleted before it had an IP) cannot change a slice.
	Candidate bool
}

// Port is a container port a named targetPort can resolve to.
type Port struct {
	Name     string
	Protocol corev1.Protocol
	Number   int32
}

// PodOf returns the facts of pod that endpoints are built from; nil for nil.
// The result shares pod's strings.
func PodOf(pod *corev1.Pod) *Pod {
	if pod == nil {
		return nil
	}
	out := &Pod{
		Namespace:   pod.Namespace,
		Name:        pod.Name,
		UID:         pod.UID,
		NodeName:    pod.Spec.NodeName,
		Hostname:    pod.Spec.Hostname,
		Subdomain:   pod.Spec.Subdomain,
		Terminating: pod.DeletionTimestamp != nil,
		Candidate:   podIsCandidate(pod),
	}
	if len(pod.Status.PodIPs) > 0 {
		out.IPs = make([]string, len(pod.Status.PodIPs))
		for i, ip := range pod.Status.PodIPs {
			out.IPs[i] = ip.IP
		}
	}
	if n := countPorts(pod.Spec.Containers, false) + countPorts(pod.Spec.InitContainers, true); n > 0 {
		out.Ports = make([]Port, 0, n)
		out.Ports = appendPorts(out.Ports, pod.Spec.Containers, false)
		out.Ports = appendPorts(out.Ports, pod.Spec.InitContainers, true)
	}
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
			out.ReadyTransition = c.LastTransitionTime.Time
			break
		}
	}
	return out
}

// PodsOf returns PodOf of each Pod, in order.
func PodsOf(pods []*corev1.Pod) []*Pod {
	out := make([]*Pod, len(pods))
	for i, p := range pods {
		out[i] = PodOf(p)
	}
	return out
}

// appendPorts appends the ports of containers; sidecarsOnly keeps only init
// containers that keep running, the only ones whose ports serve traffic.
func appendPorts(into []Port, containers []corev1.Container, sidecarsOnly bool) []Port {
	for i := range containers {
		c := &containers[i]
		if sidecarsOnly && !isSidecar(c) {
			continue
		}
		for _, cp := range c.Ports {
			into = append(into, Port{Name: cp.Name, Protocol: cp.Protocol, Number: cp.ContainerPort})
		}
	}
	return into
}

func countPorts(containers []corev1.Container, sidecarsOnly bool) int {
	n := 0
	for i := range containers {
		if !sidecarsOnly || isSidecar(&containers[i]) {
			n += len(containers[i].Ports)
		}
	}
	return n
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// podIsCandidate reports whether a Pod may be an endpoint at all. Terminating
// Pods stay (consumers fall back to them while nothing else is ready); Pods in
// a terminal phase never run again, and Pods without an IP cannot be reached.
func podIsCandidate(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0
}
