package builders

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodImage is the image of the one container MakePod gives a Pod: the API server requires one,
// and no test here runs a kubelet that would pull it.
const PodImage = "registry.k8s.io/pause:3.10"

// PodWrapper builds a Pod.
type PodWrapper struct{ corev1.Pod }

// MakePod returns a Pod with one container, named "app", and no ports, labels, Node or status.
func MakePod(namespace, name string) *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: PodImage}}},
	}}
}

// Obj returns the Pod itself: later changes through w show in it.
func (w *PodWrapper) Obj() *corev1.Pod { return &w.Pod }

// Clone returns a deep copy, so one base can give several variants.
func (w *PodWrapper) Clone() *PodWrapper { return &PodWrapper{*w.DeepCopy()} }

// UID sets the UID, which endpoints' target references carry.
func (w *PodWrapper) UID(uid types.UID) *PodWrapper {
	w.Pod.UID = uid
	return w
}

// Label sets one label.
func (w *PodWrapper) Label(key, value string) *PodWrapper {
	w.ObjectMeta.Labels = set(w.ObjectMeta.Labels, key, value)
	return w
}

// Labels sets every label of m (a nil or empty m changes nothing).
func (w *PodWrapper) Labels(m map[string]string) *PodWrapper {
	for k, v := range m {
		w.Label(k, v)
	}
	return w
}

// Node schedules the Pod to a Node.
func (w *PodWrapper) Node(name string) *PodWrapper {
	w.Spec.NodeName = name
	return w
}

// Hostname sets spec.hostname, which a headless Service's endpoints carry.
func (w *PodWrapper) Hostname(name string) *PodWrapper {
	w.Spec.Hostname = name
	return w
}

// Subdomain sets spec.subdomain.
func (w *PodWrapper) Subdomain(name string) *PodWrapper {
	w.Spec.Subdomain = name
	return w
}

// ContainerPort appends a named TCP port to the first container, which a Service's named
// targetPort resolves against.
func (w *PodWrapper) ContainerPort(name string, port int32) *PodWrapper {
	return w.ContainerPorts(append(w.Spec.Containers[0].Ports, corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP})...)
}

// ContainerPorts replaces the first container's ports by ports, as given.
func (w *PodWrapper) ContainerPorts(ports ...corev1.ContainerPort) *PodWrapper {
	w.Spec.Containers[0].Ports = ports
	return w
}

// IPs sets status.podIP to the first IP and status.podIPs to all of them.
func (w *PodWrapper) IPs(ips ...string) *PodWrapper {
	w.Status.PodIP, w.Status.PodIPs = "", nil
	for _, ip := range ips {
		w.Status.PodIPs = append(w.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		w.Status.PodIP = ips[0]
	}
	return w
}

// Phase sets status.phase.
func (w *PodWrapper) Phase(p corev1.PodPhase) *PodWrapper {
	w.Status.Phase = p
	return w
}

// Ready sets the Pod's Ready condition (and only that condition), which changed at since: an
// endpoint's readiness and the time upstream's trigger metric reads both come from it.
func (w *PodWrapper) Ready(ready bool, since time.Time) *PodWrapper {
	w.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: conditionStatus(ready), LastTransitionTime: metav1.NewTime(since)}}
	return w
}

// Terminating sets the deletion timestamp, as a delete with a grace period leaves it.
func (w *PodWrapper) Terminating(at time.Time) *PodWrapper {
	t := metav1.NewTime(at)
	w.DeletionTimestamp = &t
	return w
}

// NodeWrapper builds a Node.
type NodeWrapper struct{ corev1.Node }

// MakeNode returns a Node with no labels, no capacity and no conditions.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// Obj returns the Node itself: later changes through w show in it.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// Clone returns a deep copy, so one base can give several variants.
func (w *NodeWrapper) Clone() *NodeWrapper { return &NodeWrapper{*w.DeepCopy()} }

// Label sets one label.
func (w *NodeWrapper) Label(key, value string) *NodeWrapper {
	w.Labels = set(w.Labels, key, value)
	return w
}

// Zone sets the topology.kubernetes.io/zone label; an empty zone leaves the Node unzoned.
func (w *NodeWrapper) Zone(zone string) *NodeWrapper {
	if zone == "" {
		delete(w.Labels, corev1.LabelTopologyZone)
		return w
	}
	return w.Label(corev1.LabelTopologyZone, zone)
}

// CPU sets the allocatable CPU (a quantity such as "4" or "500m"), which topology hints and
// the cluster allocation weigh zones and clusters by.
func (w *NodeWrapper) CPU(quantity string) *NodeWrapper {
	if w.Status.Allocatable == nil {
		w.Status.Allocatable = corev1.ResourceList{}
	}
	w.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(quantity)
	return w
}

// Ready sets the Node's Ready condition (and only that condition).
func (w *NodeWrapper) Ready(ready bool) *NodeWrapper {
	w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: conditionStatus(ready)}}
	return w
}

func conditionStatus(ok bool) corev1.ConditionStatus {
	if ok {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}
