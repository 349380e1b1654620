package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/topology"
)

// CacheOptions keeps the manager's informer cache small: managed fields are dropped from every
// object, Pods keep only what endpoints are built from and Nodes only what zones and CPU shares
// are. A separate controller process has to cache every Pod of the cluster itself
// (kube-controller-manager shares one Pod cache among all its controllers), so at 10,000 Pods
// Pods are most of the manager's memory.
//
// Services and EndpointSlices are cached whole (but for managed fields): the multi-cluster
// controllers, which share this cache, copy local slices to the broker and rewrite derived
// Services and imported slices from what they read, and a trimmed object written back would drop
// the fields left out.
//
// Objects read from this cache must never be written back: a trimmed Pod or Node sent in an
// update would drop the fields left out. fleetslice never writes Pods or Nodes.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: TrimPod},
			&corev1.Node{}: {Transform: TrimNode},
		},
	}
}

// TrimPod is a cache transform that keeps the Pod fields the EndpointSlice controller reads:
// name, namespace, UID, resourceVersion and labels, deletion, node, hostname and subdomain, the
// ports of containers and of restartable init containers (named target ports), phase, the Ready
// condition's status and last transition (readiness and trigger times) and IPs. Anything else
// (tombstones included) passes unchanged. It is idempotent.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pod.Name,
			Namespace:         pod.Namespace,
			UID:               pod.UID,
			ResourceVersion:   pod.ResourceVersion,
			DeletionTimestamp: pod.DeletionTimestamp,
			Labels:            pod.Labels,
		},
		Spec: corev1.PodSpec{
			NodeName:       pod.Spec.NodeName,
			Hostname:       pod.Spec.Hostname,
			Subdomain:      pod.Spec.Subdomain,
			Containers:     portsOnly(pod.Spec.Containers, false),
			InitContainers: portsOnly(pod.Spec.InitContainers, true),
		},
		Status: corev1.PodStatus{
			Phase:  pod.Status.Phase,
			PodIP:  pod.Status.PodIP,
			PodIPs: pod.Status.PodIPs,
		},
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	return out, nil
}

// portsOnly keeps the containers that have ports, with their name, ports and restart policy;
// restartable keeps only init containers that keep running (sidecars), the only ones whose
// ports serve traffic.
func portsOnly(containers []corev1.Container, restartable bool) []corev1.Container {
	var out []corev1.Container
	for _, c := range containers {
		if len(c.Ports) == 0 {
			continue
		}
		if restartable && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
			continue
		}
		out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy})
	}
	return out
}

// TrimNode is a cache transform that keeps the Node fields the controllers read: name,
// resourceVersion, the zone and control-plane role labels, the Ready condition's status and the
// allocatable CPU (zone hints' CPU shares and the CPU a member publishes to its ClusterSet).
// Anything else (tombstones included) passes unchanged. It is idempotent.
func TrimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta: node.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:            node.Name,
			ResourceVersion: node.ResourceVersion,
		},
	}
	for _, key := range []string{corev1.LabelTopologyZone, topology.LabelControlPlane, topology.LabelMasterRole} {
		if v, ok := node.Labels[key]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[key] = v
		}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
			break
		}
	}
	if cpu, ok := node.Status.Allocatable[corev1.ResourceCPU]; ok {
		out.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: cpu}
	}
	return out, nil
}
