package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions keeps the manager's informer cache small: managed fields are dropped from every
// object and Pods keep only what endpoints are built from. A separate controller process has to
// cache every Pod of the cluster itself (kube-controller-manager shares one Pod cache among all
// its controllers), so at 10,000 Pods this is most of the manager's memory.
//
// Objects read from this cache must never be written back: a trimmed Pod sent in an update
// would drop the fields left out. fleetslice never writes Pods.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: TrimPod},
		},
	}
}

// TrimPod is a cache transform that keeps the Pod fields the EndpointSlice controller reads:
// identity and labels, deletion, node, hostname and subdomain, container and restartable init
// container ports (named target ports), phase, conditions and IPs. Anything else (tombstones
// included) passes unchanged.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			Generation:                 pod.Generation,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     pod.Labels,
			OwnerReferences:            pod.OwnerReferences,
		},
		Spec: corev1.PodSpec{
			NodeName:       pod.Spec.NodeName,
			Hostname:       pod.Spec.Hostname,
			Subdomain:      pod.Spec.Subdomain,
			Containers:     portsOnly(pod.Spec.Containers),
			InitContainers: portsOnly(pod.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			Phase:      pod.Status.Phase,
			Conditions: pod.Status.Conditions,
			PodIP:      pod.Status.PodIP,
			PodIPs:     pod.Status.PodIPs,
		},
	}, nil
}

func portsOnly(containers []corev1.Container) []corev1.Container {
	if containers == nil {
		return nil
	}
	out := make([]corev1.Container, len(containers))
	for i, c := range containers {
		out[i] = corev1.Container{Name: c.Name, Ports: c.Ports, RestartPolicy: c.RestartPolicy}
	}
	return out
}
