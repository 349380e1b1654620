package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/topology"
)

// CacheOptions keeps the manager's informer cache small: managed fields are dropped from every
// object, Pods are cached as CachedPod (only what endpoints are built from) and Nodes keep only
// what zones and CPU shares are. A separate controller process has to cache every Pod of the
// cluster itself (kube-controller-manager shares one Pod cache among all its controllers), so at
// 10,000 Pods Pods are most of the manager's memory.
//
// The cache therefore holds no corev1.Pod: the Pod informer's indexer and event handlers hand out
// *CachedPod, and a Get or List of Pods through the manager's cache fails with a type error. The
// EndpointSlice reconciler reads Pods through the informer (SetupWithManager); nothing else in the
// manager reads Pods.
//
// Services and EndpointSlices are cached whole (but for managed fields): the multi-cluster
// controllers, which share this cache, copy local slices to the broker and rewrite derived
// Services and imported slices from what they read, and a trimmed object written back would drop
// the fields left out.
//
// Objects read from this cache must never be written back: a trimmed Node sent in an update
// would drop the fields left out. fleetslice never writes Pods or Nodes.
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: CompactPod},
			&corev1.Node{}: {Transform: TrimNode},
		},
	}
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
