package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Labels that keep an object away from every Service proxy, as kube-proxy
// honours them: a Service handled by another proxy, and headless slices.
const (
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	LabelHeadless         = corev1.IsHeadlessService
)

// CacheOptions restricts a controller-runtime cache to what the agent on
// nodeName needs: its own Node, Services that have a cluster IP and are not
// handled by another proxy, and the non-headless EndpointSlices that belong
// to a Service. Every object is trimmed to what the agent reads (TrimObject)
// before it enters the cache, to save memory on every node; the transform is
// the default one rather than a ByObject entry, because a ByObject entry for
// a kind whose CRD is missing (ServiceImports, ClusterProperties) fails the
// whole cache.
func CacheOptions(nodeName string) cache.Options {
	noProxyName := requirement(LabelServiceProxyName, selection.DoesNotExist)
	return cache.Options{
		DefaultTransform: TrimObject,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", nodeName)},
			&corev1.Service{}: {
				Label: labels.NewSelector().Add(noProxyName),
				Field: fields.AndSelectors(
					fields.OneTermNotEqualSelector("spec.clusterIP", corev1.ClusterIPNone),
					fields.OneTermNotEqualSelector("spec.type", string(corev1.ServiceTypeExternalName)),
				),
			},
			&discoveryv1.EndpointSlice{}: {Label: labels.NewSelector().Add(
				requirement(discoveryv1.LabelServiceName, selection.Exists),
				requirement(LabelHeadless, selection.DoesNotExist),
				noProxyName,
			)},
		},
	}
}

func requirement(key string, op selection.Operator) labels.Requirement {
	r, err := labels.NewRequirement(key, op, nil)
	if err != nil {
		// Only constant, valid keys reach here.
		panic(err)
	}
	return *r
}

// watch registers the agent's handlers on the informers and returns the
// registrations, whose HasSynced says when the initial lists have arrived.
// A cluster without the ServiceImport CRD is no error: derived Services
// simply keep their own cluster IPs.
func (a *Agent) watch(ctx context.Context) ([]toolscache.ResourceEventHandlerRegistration, error) {
	var regs []toolscache.ResourceEventHandlerRegistration
	add := func(obj client.Object, h toolscache.ResourceEventHandler) error {
		inf, err := a.informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return err
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return err
		}
		regs = append(regs, reg)
		return nil
	}
	if err := add(&corev1.Node{}, handler(a.onNode)); err != nil {
		return nil, fmt.Errorf("watching Node %s: %w", a.opts.NodeName, err)
	}
	if err := add(&corev1.Service{}, handler(a.onService)); err != nil {
		return nil, fmt.Errorf("watching Services: %w", err)
	}
	if err := add(&discoveryv1.EndpointSlice{}, handler(a.onSlice)); err != nil {
		return nil, fmt.Errorf("watching EndpointSlices: %w", err)
	}
	reg, err := a.watchClusterProperty(ctx)
	if err != nil {
		return nil, err
	}
	if reg != nil {
		regs = append(regs, reg)
	}
	if a.opts.WatchServiceImports {
		err := add(&mcsv1beta1.ServiceImport{}, handler(a.onImport))
		switch {
		case meta.IsNoMatchError(err):
			a.log.Info("ServiceImport CRD not installed: derived Services keep only their own cluster IPs", "error", err.Error())
		case err != nil:
			return nil, fmt.Errorf("watching ServiceImports: %w", err)
		}
	}
	return regs, nil
}

// handler adapts a typed callback (nil old on add, nil new on delete) to an
// informer handler, unwrapping the tombstones of missed deletions.
func handler[T client.Object](fn func(old, new T)) toolscache.ResourceEventHandler {
	var zero T
	cast := func(obj any) (T, bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		v, ok := obj.(T)
		return v, ok
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if v, ok := cast(obj); ok {
				fn(zero, v)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := cast(oldObj)
			n, ok2 := cast(newObj)
			// A periodic resync replays objects that did not change.
			if ok1 && ok2 && o.GetResourceVersion() != n.GetResourceVersion() {
				fn(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if v, ok := cast(obj); ok {
				fn(v, zero)
			}
		},
	}
}

func (a *Agent) onNode(old, node *corev1.Node) {
	seen := node
	if seen == nil {
		seen = old
	}
	// The cache is normally filtered to this node; an unfiltered one must
	// not let other Nodes set the zone.
	if seen.Name != a.opts.NodeName {
		return
	}
	a.store.setNode(node)
}

func (a *Agent) onService(old, svc *corev1.Service) {
	if svc == nil {
		a.store.setService(client.ObjectKeyFromObject(old), nil)
		return
	}
	a.store.setService(client.ObjectKeyFromObject(svc), svc)
}

func (a *Agent) onImport(old, imp *mcsv1beta1.ServiceImport) {
	if imp == nil {
		a.store.setImport(client.ObjectKeyFromObject(old), nil)
		return
	}
	a.store.setImport(client.ObjectKeyFromObject(imp), imp)
}

func (a *Agent) onSlice(old, slice *discoveryv1.EndpointSlice) {
	serviceOf := func(s *discoveryv1.EndpointSlice) (types.NamespacedName, bool) {
		name := s.Labels[discoveryv1.LabelServiceName]
		return types.NamespacedName{Namespace: s.Namespace, Name: name}, name != ""
	}
	if old != nil {
		// A relabelled slice leaves its old Service.
		if key, ok := serviceOf(old); ok {
			if slice == nil {
				a.store.setSlice(key, old.Name, nil, time.Time{})
			} else if newKey, _ := serviceOf(slice); newKey != key {
				a.store.setSlice(key, old.Name, nil, time.Time{})
			}
		}
	}
	if slice == nil {
		return
	}
	key, ok := serviceOf(slice)
	if !ok {
		return
	}
	var trigger time.Time
	if old == nil || old.Annotations[corev1.EndpointsLastChangeTriggerTime] != slice.Annotations[corev1.EndpointsLastChangeTriggerTime] {
		trigger = triggerTime(slice)
	}
	a.store.setSlice(key, slice.Name, slice, trigger)
}

// triggerTime parses the last-change-trigger-time annotation; a missing or
// malformed one gives zero and is not measured.
func triggerTime(slice *discoveryv1.EndpointSlice) time.Time {
	v, ok := slice.Annotations[corev1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}
