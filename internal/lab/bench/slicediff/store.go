package slicediff

import (
	"fmt"
	"maps"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ordered holds objects by name in insertion order, so every list comes out in the same order
// for both controllers and from run to run.
type ordered[T any] struct {
	items   []*T
	keys    []types.NamespacedName
	index   map[types.NamespacedName]int
	removed int
}

func (o *ordered[T]) get(key types.NamespacedName) *T {
	if i, ok := o.index[key]; ok {
		return o.items[i]
	}
	return nil
}

func (o *ordered[T]) put(key types.NamespacedName, obj *T) {
	if o.index == nil {
		o.index = map[types.NamespacedName]int{}
	}
	if i, ok := o.index[key]; ok {
		o.items[i] = obj
		return
	}
	o.index[key] = len(o.items)
	o.items = append(o.items, obj)
	o.keys = append(o.keys, key)
}

func (o *ordered[T]) remove(key types.NamespacedName) *T {
	i, ok := o.index[key]
	if !ok {
		return nil
	}
	obj := o.items[i]
	o.items[i] = nil
	delete(o.index, key)
	o.removed++
	if o.removed > len(o.items)/2 {
		o.compact()
	}
	return obj
}

func (o *ordered[T]) compact() {
	items, keys := o.items[:0], o.keys[:0]
	for i, obj := range o.items {
		if obj != nil {
			o.index[o.keys[i]] = len(items)
			items = append(items, obj)
			keys = append(keys, o.keys[i])
		}
	}
	clear(o.items[len(items):])
	o.items, o.keys, o.removed = items, keys, 0
}

func (o *ordered[T]) len() int { return len(o.index) }

// each calls fn for every object in insertion order.
func (o *ordered[T]) each(fn func(*T)) {
	for _, obj := range o.items {
		if obj != nil {
			fn(obj)
		}
	}
}

// Writes counts what a controller sent to the API server for EndpointSlices.
type Writes struct {
	Creates, Updates, Deletes int64
	// RequestBytes is the protobuf size of every object sent in a create or update (deletes
	// carry no object).
	RequestBytes int64
	// WatchBytes is the protobuf size of every watch event's object: created, updated and, for
	// deletes, the last state. Every watcher of EndpointSlices (each node's proxy) receives it.
	WatchBytes int64
}

// Total is the number of API writes.
func (w Writes) Total() int64 { return w.Creates + w.Updates + w.Deletes }

// store stands in for both the API server and the informer caches of one controller: reads
// see every write at once, so each sync plans from exactly what the previous sync left. It
// keeps the API server semantics the controllers rely on: generated names, UIDs, resource
// version conflicts, and generations that move only when a slice's content or labels change.
type store struct {
	services ordered[corev1.Service]
	pods     ordered[corev1.Pod]
	nodes    ordered[corev1.Node]
	slices   ordered[discoveryv1.EndpointSlice]

	now          time.Time
	resourceVer  int64
	created      int64
	writes       Writes
	sliceDeleted func(*discoveryv1.EndpointSlice)
}

func newStore(now time.Time) *store { return &store{now: now} }

func keyOf(meta metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: meta.GetNamespace(), Name: meta.GetName()}
}

func (s *store) nextResourceVersion() string {
	s.resourceVer++
	return fmt.Sprint(s.resourceVer)
}

// putService, putPod and putNode replace world objects; they are not controller writes and are
// not counted. The store keeps the object it is given.
func (s *store) putService(svc *corev1.Service) {
	svc.ResourceVersion = s.nextResourceVersion()
	s.services.put(keyOf(svc), svc)
}

func (s *store) putPod(pod *corev1.Pod) {
	pod.ResourceVersion = s.nextResourceVersion()
	s.pods.put(keyOf(pod), pod)
}

func (s *store) deletePod(key types.NamespacedName) { s.pods.remove(key) }

func (s *store) putNode(node *corev1.Node) {
	node.ResourceVersion = s.nextResourceVersion()
	s.nodes.put(keyOf(node), node)
}

// createSlice stores a copy of slice as the API server would, naming it from generateName with
// a counter so runs are reproducible and both controllers' names have the same length.
func (s *store) createSlice(in *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	obj := in.DeepCopy()
	s.created++
	if obj.Name == "" {
		if obj.GenerateName == "" {
			return nil, apierrors.NewBadRequest("EndpointSlice needs a name or generateName")
		}
		obj.Name = fmt.Sprintf("%s%05d", obj.GenerateName, s.created)
	}
	key := keyOf(obj)
	if s.slices.get(key) != nil {
		return nil, apierrors.NewAlreadyExists(discoveryv1.Resource("endpointslices"), obj.Name)
	}
	obj.UID = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", s.created))
	obj.Generation = 1
	obj.CreationTimestamp = metav1.NewTime(s.now)
	obj.ResourceVersion = s.nextResourceVersion()
	s.slices.put(key, obj)
	s.writes.Creates++
	s.writes.RequestBytes += int64(in.Size())
	s.writes.WatchBytes += int64(obj.Size())
	return obj.DeepCopy(), nil
}

// updateSlice replaces a slice. An empty resourceVersion updates unconditionally, as the API
// server allows for EndpointSlices.
func (s *store) updateSlice(in *discoveryv1.EndpointSlice) (*discoveryv1.EndpointSlice, error) {
	key := keyOf(in)
	cur := s.slices.get(key)
	if cur == nil {
		return nil, apierrors.NewNotFound(discoveryv1.Resource("endpointslices"), in.Name)
	}
	if (in.ResourceVersion != "" && in.ResourceVersion != cur.ResourceVersion) || (in.UID != "" && in.UID != cur.UID) {
		return nil, apierrors.NewConflict(discoveryv1.Resource("endpointslices"), in.Name,
			fmt.Errorf("object was modified: have resourceVersion %s, got %s", cur.ResourceVersion, in.ResourceVersion))
	}
	obj := in.DeepCopy()
	obj.UID, obj.CreationTimestamp, obj.GenerateName = cur.UID, cur.CreationTimestamp, cur.GenerateName
	obj.Generation = cur.Generation
	if contentChanged(cur, obj) {
		obj.Generation++
	}
	obj.ResourceVersion = s.nextResourceVersion()
	s.slices.put(key, obj)
	s.writes.Updates++
	s.writes.RequestBytes += int64(in.Size())
	s.writes.WatchBytes += int64(obj.Size())
	return obj.DeepCopy(), nil
}

// contentChanged mirrors the API server's rule for bumping an EndpointSlice's generation:
// anything but metadata changed, or the labels did.
func contentChanged(a, b *discoveryv1.EndpointSlice) bool {
	return a.AddressType != b.AddressType || !reflect.DeepEqual(a.Endpoints, b.Endpoints) ||
		!reflect.DeepEqual(a.Ports, b.Ports) || !maps.Equal(a.Labels, b.Labels)
}

// deleteSlice removes a slice, honouring a UID precondition.
func (s *store) deleteSlice(key types.NamespacedName, uid *types.UID) error {
	cur := s.slices.get(key)
	if cur == nil {
		return apierrors.NewNotFound(discoveryv1.Resource("endpointslices"), key.Name)
	}
	if uid != nil && *uid != cur.UID {
		return apierrors.NewConflict(discoveryv1.Resource("endpointslices"), key.Name,
			fmt.Errorf("precondition failed: UID %s, object has %s", *uid, cur.UID))
	}
	s.slices.remove(key)
	s.writes.Deletes++
	s.writes.WatchBytes += int64(cur.Size())
	if s.sliceDeleted != nil {
		s.sliceDeleted(cur)
	}
	return nil
}

// slicesOf returns the stored slices of a Service written by managedBy, as a lister would:
// shared objects the caller must not modify.
func (s *store) slicesOf(svc types.NamespacedName, managedBy string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	s.slices.each(func(sl *discoveryv1.EndpointSlice) {
		if sl.Namespace == svc.Namespace && sl.Labels[discoveryv1.LabelServiceName] == svc.Name &&
			sl.Labels[discoveryv1.LabelManagedBy] == managedBy {
			out = append(out, sl)
		}
	})
	return out
}

// allNodes returns the stored Nodes, shared.
func (s *store) allNodes() []*corev1.Node {
	out := make([]*corev1.Node, 0, s.nodes.len())
	s.nodes.each(func(n *corev1.Node) { out = append(out, n) })
	return out
}
