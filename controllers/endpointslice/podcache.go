package endpointslice

import (
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// CachedPod is what the manager's cache keeps of a Pod: the facts endpoints are built from
// (endpoints.Pod), its labels (which Services select it), resourceVersion and deletion timestamp,
// made a client.Object so the Pod informer can store and hand it out. CompactPod makes one.
//
// It is not a corev1.Pod: the Pod informer's indexer, its event handlers and the reconciler read
// it, and a Get or List of Pods through the manager's cache fails with a type error instead of
// returning Pods with most fields missing. Its metadata setters change only what it holds.
type CachedPod struct {
	endpoints.Pod
	labels            podLabels
	ResourceVersion   string
	DeletionTimestamp *metav1.Time
}

// CompactPod is the Pod informer's transform: a Pod becomes a CachedPod (CachePod); anything else
// (a CachedPod, a tombstone) passes unchanged, so it is idempotent.
//
// At 10,000 Pods a trimmed corev1.Pod took 2.5 KB in the cache, most of it the fixed 1,240-byte
// struct and a 408-byte container; a CachedPod takes about 370 bytes with its strings.
func CompactPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return CachePod(pod), nil
	}
	return obj, nil
}

// CachePod returns what the manager's cache keeps of pod; nil for nil. Strings that many Pods
// share (namespace, node, subdomain, port names and protocols, the labels) are interned: 10,000
// Pods of one Deployment hold one copy of each.
func CachePod(pod *corev1.Pod) *CachedPod {
	if pod == nil {
		return nil
	}
	c := &CachedPod{Pod: *endpoints.PodOf(pod), labels: labelsOf(pod.Labels),
		ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp}
	c.Namespace = intern(c.Namespace)
	c.NodeName = intern(c.NodeName)
	c.Subdomain = intern(c.Subdomain)
	for i := range c.Ports {
		c.Ports[i].Name = intern(c.Ports[i].Name)
		c.Ports[i].Protocol = corev1.Protocol(intern(string(c.Ports[i].Protocol)))
	}
	return c
}

// intern returns the one copy of s that every interned caller shares; it is freed when the last
// holder is gone.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// cachedPodOf returns a Pod as the manager's cache keeps it, from what an informer or a client
// hands out: a CachedPod from the manager's cache, a whole Pod from a reader that stands in for
// it (the tests' fake client, the in-process bench). Anything else is nil.
func cachedPodOf(obj any) *CachedPod {
	switch p := obj.(type) {
	case *CachedPod:
		return p
	case *corev1.Pod:
		return CachePod(p)
	}
	return nil
}

// Labels returns the Pod's labels for a selector to match.
func (p *CachedPod) Labels() labels.Labels { return p.labels }

// podGVK is what a CachedPod stands for.
var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// GetObjectKind reports the Pod kind.
func (p *CachedPod) GetObjectKind() schema.ObjectKind { return cachedPodKind{} }

// DeepCopyObject copies the CachedPod; IPs and ports are copied, interned strings and labels shared.
func (p *CachedPod) DeepCopyObject() runtime.Object {
	if p == nil {
		return nil
	}
	out := *p
	out.IPs = append([]string(nil), p.IPs...)
	out.Ports = append([]endpoints.Port(nil), p.Ports...)
	out.DeletionTimestamp = p.DeletionTimestamp.DeepCopy()
	return &out
}

// cachedPodKind is a CachedPod's fixed kind: it is always a Pod.
type cachedPodKind struct{}

func (cachedPodKind) SetGroupVersionKind(schema.GroupVersionKind) {}
func (cachedPodKind) GroupVersionKind() schema.GroupVersionKind   { return podGVK }

// The metav1.Object methods, over what a CachedPod holds.

func (p *CachedPod) GetNamespace() string               { return p.Namespace }
func (p *CachedPod) SetNamespace(ns string)             { p.Namespace = ns }
func (p *CachedPod) GetName() string                    { return p.Name }
func (p *CachedPod) SetName(name string)                { p.Name = name }
func (p *CachedPod) GetGenerateName() string            { return "" }
func (p *CachedPod) SetGenerateName(string)             {}
func (p *CachedPod) GetUID() types.UID                  { return p.UID }
func (p *CachedPod) SetUID(uid types.UID)               { p.UID = uid }
func (p *CachedPod) GetResourceVersion() string         { return p.ResourceVersion }
func (p *CachedPod) SetResourceVersion(rv string)       { p.ResourceVersion = rv }
func (p *CachedPod) GetGeneration() int64               { return 0 }
func (p *CachedPod) SetGeneration(int64)                {}
func (p *CachedPod) GetSelfLink() string                { return "" }
func (p *CachedPod) SetSelfLink(string)                 {}
func (p *CachedPod) GetCreationTimestamp() metav1.Time  { return metav1.Time{} }
func (p *CachedPod) SetCreationTimestamp(metav1.Time)   {}
func (p *CachedPod) GetDeletionTimestamp() *metav1.Time { return p.DeletionTimestamp }
func (p *CachedPod) SetDeletionTimestamp(t *metav1.Time) {
	p.DeletionTimestamp, p.Terminating = t, t != nil
}
func (p *CachedPod) GetDeletionGracePeriodSeconds() *int64 { return nil }
func (p *CachedPod) SetDeletionGracePeriodSeconds(*int64)  {}
func (p *CachedPod) GetLabels() map[string]string          { return p.labels.Map() }
func (p *CachedPod) SetLabels(labels map[string]string)    { p.labels = labelsOf(labels) }
func (p *CachedPod) GetAnnotations() map[string]string     { return nil }
func (p *CachedPod) SetAnnotations(map[string]string)      {}
func (p *CachedPod) GetFinalizers() []string               { return nil }
func (p *CachedPod) SetFinalizers([]string)                {}
func (p *CachedPod) GetOwnerReferences() []metav1.OwnerReference {
	return nil
}
func (p *CachedPod) SetOwnerReferences([]metav1.OwnerReference)    {}
func (p *CachedPod) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (p *CachedPod) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
