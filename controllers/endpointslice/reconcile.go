package endpointslice

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/selection"
)

// +kubebuilder:rbac:groups="",resources=services;pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch;create;update;delete
// Slices name the Service as their controller with blockOwnerDeletion, which the
// OwnerReferencesPermissionEnforcement admission plugin allows only to whoever may update the
// Service's finalizers.
// +kubebuilder:rbac:groups="",resources=services/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// staleCacheRetry is how soon a sync that found the cache behind its own writes runs again. The
// watch of our own write is normally milliseconds behind it; coalescing already folds bursts, so
// a longer wait only delays the changes this sync was woken for (at 1 s, these retries were the
// p99 of the bench's network programming latency).
const staleCacheRetry = 100 * time.Millisecond

// unknownNodeRetry is how soon a Service is synced again when some of its Pods run on Nodes the
// cache does not know yet.
const unknownNodeRetry = 5 * time.Second

// Reconcile brings one Service's EndpointSlices to the desired state: it reads the Service, its
// slices, Pods and the Nodes, plans every write in one pure step (planSync), and writes the plan.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	logger := log.FromContext(ctx)
	if wait := r.coalesce.Hold(req.NamespacedName, time.Now()); wait > 0 {
		// Woken before this Service's burst of changes settled; not a sync.
		syncsDeferred.Inc()
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	outcome := syncSuccess
	defer func() {
		if err != nil {
			outcome = syncError
		}
		endpointSliceSyncs.WithLabelValues(outcome).Inc()
	}()

	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, req.NamespacedName, svc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if svc.DeletionTimestamp != nil {
		// The garbage collector removes the slices through their owner reference; writing now
		// would only recreate what it is about to delete.
		return ctrl.Result{}, nil
	}

	sel, err := selection.Of(svc, r.Options.Services)
	if err != nil {
		// Bad input is the user's to fix; the slices stay as they were until then.
		r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, "InvalidSelectorAnnotation", "Sync",
			"Keeping the EndpointSlices as they are: %v", err)
		outcome = syncInvalid
		return ctrl.Result{}, nil
	}
	if sel.Ignored != "" {
		r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, "SelectorAnnotationIgnored", "Sync", "%s", sel.Ignored)
	}

	existing, err := r.managedSlices(ctx, req.NamespacedName, sel.AdoptUpstream)
	if err != nil {
		return ctrl.Result{}, err
	}
	if r.tracker.Stale(req.NamespacedName, existing) {
		// Planning from slices older than our own writes would create duplicates; this is
		// expected right after a write, not a failure.
		logger.V(1).Info("cache behind own writes, retrying", "service", req.NamespacedName, "after", staleCacheRetry)
		outcome = syncStale
		return ctrl.Result{RequeueAfter: staleCacheRetry}, nil
	}
	return r.sync(ctx, svc, sel, existing)
}

// sync reads the Service's Pods and Nodes, plans its slices once and writes the plan.
func (r *Reconciler) sync(ctx context.Context, svc *corev1.Service, sel selection.Selection, existing []*discoveryv1.EndpointSlice) (ctrl.Result, error) {
	// From here the sync reads, plans and writes: its duration, with its writes counted as if
	// made one after another (the API time they cost, their round trips above all), is the load
	// the Service's next coalescing window adapts to; writing them side by side shortens the
	// latency, not the window. A stale retry above says nothing of that load and is not reported.
	start := time.Now()
	var writing, apiTime time.Duration
	defer func() { r.coalesce.Synced(client.ObjectKeyFromObject(svc), time.Since(start)-writing+apiTime) }()

	if sel.Selector == nil {
		// A Service that became ExternalName, lost its selector or is kube-controller-manager's
		// to serve has no endpoints of ours.
		return ctrl.Result{}, r.deleteAll(ctx, svc, existing)
	}

	pods, err := r.selectedPods(ctx, svc, sel.Selector)
	if err != nil {
		return ctrl.Result{}, err
	}
	nodes, err := r.nodesByName(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	desired := endpoints.Build(svc, pods, nodes)
	mode, _ := hints.ModeOf(svc)
	plan, err := planSync(syncInput{
		svc: svc, desired: desired, existing: existing,
		mode: mode, zones: hints.ZonesFor(mode, nodes), trigger: r.triggerTime(svc, pods),
	}, r.Options)
	if err != nil {
		return ctrl.Result{}, err
	}

	wrote := time.Now()
	apiTime, err = r.write(ctx, svc, plan)
	writing = time.Since(wrote)
	if err != nil {
		r.Recorder.Eventf(svc, nil, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices", "Sync",
			"Error updating EndpointSlices for Service %s/%s: %v", svc.Namespace, svc.Name, err)
		return ctrl.Result{}, err
	}
	r.report(ctx, svc, plan)
	r.reportHints(svc, plan.hints)

	if len(desired.PodsOnUnknownNodes) > 0 {
		log.FromContext(ctx).Info("skipped Pods on Nodes not in the cache yet", "service", client.ObjectKeyFromObject(svc),
			"pods", desired.PodsOnUnknownNodes)
		return ctrl.Result{RequeueAfter: unknownNodeRetry}, nil
	}
	return ctrl.Result{}, nil
}

// managedSlices lists the slices of a Service this controller writes, with kube-controller-manager's
// when it takes those over (adoptUpstream, or Options.AdoptUpstreamSlices).
func (r *Reconciler) managedSlices(ctx context.Context, svc types.NamespacedName, adoptUpstream bool) ([]*discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	// Shared with the cache, not deep-copied: planSync never modifies its input (placement
	// writes its updates into copies), and a deep copy of every slice on every sync was an
	// eighth of what the manager allocated at 10,000 Pods.
	if err := r.Client.List(ctx, list, client.InNamespace(svc.Namespace),
		client.MatchingFields{sliceServiceIndex: svc.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing EndpointSlices of %s: %w", svc, err)
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(list.Items))
	for i := range list.Items {
		if r.manages(&list.Items[i], adoptUpstream) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// selectedPods returns the cached Pods svc selects, shared with the cache: nothing below modifies
// them. Through the informer's index they are read in place; a List, even without deep copies,
// copies every Pod of the namespace into its items, which at 10,000 Pods was a third of
// everything the manager allocated.
func (r *Reconciler) selectedPods(ctx context.Context, svc *corev1.Service, selector labels.Selector) ([]*endpoints.Pod, error) {
	if r.pods != nil {
		objs, err := r.pods.ByIndex(toolscache.NamespaceIndex, svc.Namespace)
		if err != nil {
			return nil, fmt.Errorf("listing Pods of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		var pods []*endpoints.Pod
		for _, o := range objs {
			if pod := cachedPodOf(o); pod != nil && selector.Matches(pod.Labels()) {
				pods = append(pods, &pod.Pod)
			}
		}
		return pods, nil
	}
	list := &corev1.PodList{}
	// A reader standing in for the manager's cache (the tests' fake client, the in-process bench)
	// holds whole Pods.
	if err := r.Client.List(ctx, list, client.InNamespace(svc.Namespace),
		client.MatchingLabelsSelector{Selector: selector},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Pods of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	pods := make([]*endpoints.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = endpoints.PodOf(&list.Items[i])
	}
	return pods, nil
}

// podsOnNode returns the cached Pods on a Node, through the informer's node index as
// selectedPods reads them.
func (r *Reconciler) podsOnNode(ctx context.Context, nodeName string) ([]*CachedPod, error) {
	var objs []any
	if r.pods != nil {
		var err error
		if objs, err = r.pods.ByIndex(podNodeIndex, nodeName); err != nil {
			return nil, err
		}
	} else {
		list := &corev1.PodList{}
		if err := r.Client.List(ctx, list, client.MatchingFields{podNodeIndex: nodeName}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
	}
	pods := make([]*CachedPod, 0, len(objs))
	for _, o := range objs {
		if pod := cachedPodOf(o); pod != nil {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

func (r *Reconciler) nodesByName(ctx context.Context) (map[string]*corev1.Node, error) {
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	nodes := make(map[string]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[list.Items[i].Name] = &list.Items[i]
	}
	return nodes, nil
}

// triggerTime is the last-change-trigger-time for this sync; see endpoints.LastChangeTriggerTime.
func (r *Reconciler) triggerTime(svc *corev1.Service, pods []*endpoints.Pod) time.Time {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	r.triggerMu.Lock()
	defer r.triggerMu.Unlock()
	t, next := endpoints.LastChangeTriggerTime(r.triggers[key], svc, pods)
	r.triggers[key] = &next
	return t
}

func (r *Reconciler) forget(svc types.NamespacedName) {
	r.tracker.ForgetService(svc)
	r.totals.forget(svc)
	r.coalesce.Forget(svc)
	r.forgetHints(svc)
	r.triggerMu.Lock()
	delete(r.triggers, svc)
	r.triggerMu.Unlock()
}

// deleteAll removes every slice this controller wrote for a Service that no longer has endpoints
// of ours.
func (r *Reconciler) deleteAll(ctx context.Context, svc *corev1.Service, existing []*discoveryv1.EndpointSlice) error {
	if len(existing) == 0 {
		r.forget(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
		return nil
	}
	_, err := r.write(ctx, svc, &syncPlan{delete: existing})
	return err
}
