package endpointslice

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/selection"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Field indexes this controller reads through.
const (
	// sliceServiceIndex indexes EndpointSlices by their kubernetes.io/service-name label.
	sliceServiceIndex = "endpointslice.serviceName"
	// podNodeIndex indexes Pods by spec.nodeName, to find the Services a Node change affects.
	podNodeIndex = "pod.spec.nodeName"
	// serviceModeIndex indexes Services by topology mode, to find those whose CPU-proportional
	// hints a Node change can move.
	serviceModeIndex = "service.topologyMode"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// Retry backoff of a failed sync, as kube-controller-manager's controller: the first retry waits a
// second, by which time more Pod changes have arrived and the retry writes them in one go.
// controller-runtime's default starts at 5ms, which during a rollout turns every event into its
// own sync and write. (A sync that found the cache behind its own writes is no failure: it asks
// for a requeue after staleCacheRetry itself.)
const (
	syncBackoffBase = time.Second
	syncBackoffMax  = 1000 * time.Second
)

func syncRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](syncBackoffBase, syncBackoffMax),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// SetupWithManager registers the indexes, watches and the controller.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	// Pods are read in place through the Pod informer's own indexer (selectedPods,
	// enqueueServicesOnNode), which holds CachedPods: a client List of Pods through the cache would
	// fail on them. Their node index is therefore the informer's own, not a field index.
	podInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("getting the Pod informer: %w", err)
	}
	ix, ok := podInformer.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return fmt.Errorf("the manager's cache does not expose the Pod informer's indexer (%T)", podInformer)
	}
	for _, index := range FieldIndexes() {
		if _, isPod := index.Object.(*corev1.Pod); isPod {
			extract := index.Extract
			err = podInformer.AddIndexers(toolscache.Indexers{index.Field: func(obj any) ([]string, error) {
				o, _ := obj.(client.Object)
				return extract(o), nil
			}})
		} else {
			err = mgr.GetFieldIndexer().IndexField(ctx, index.Object, index.Field, index.Extract)
		}
		if err != nil {
			return fmt.Errorf("indexing %T by %s: %w", index.Object, index.Field, err)
		}
	}
	r.pods = ix.GetIndexer()
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Service{}).
		Watches(&discoveryv1.EndpointSlice{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { r.sliceChanged(ctx, e.Object, q) },
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) { r.sliceChanged(ctx, e.ObjectNew, q) },
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { r.sliceDeleted(ctx, e.Object, q) },
		}).
		Watches(&corev1.Pod{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { r.podChanged(ctx, nil, e.Object, q) },
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
				r.podChanged(ctx, e.ObjectOld, e.ObjectNew, q)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { r.podChanged(ctx, e.Object, nil, q) },
		}).
		Watches(&corev1.Node{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { r.nodeChanged(ctx, nil, e.Object, q) },
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
				r.nodeChanged(ctx, e.ObjectOld, e.ObjectNew, q)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) { r.nodeChanged(ctx, e.Object, nil, q) },
		}).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency, RateLimiter: syncRateLimiter()}).
		Complete(r)
}

// sliceChanged syncs a Service when one of its slices changed behind this controller's back:
// someone edited or deleted a slice, or the garbage collector removed it. Echoes of our own writes
// are skipped.
func (r *Reconciler) sliceChanged(ctx context.Context, obj client.Object, q queue) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	svc, ok := serviceOf(slice)
	if !ok || !r.watches(ctx, svc, slice) || r.tracker.IsOwnWrite(svc, slice) {
		return
	}
	q.AddAfter(reconcile.Request{NamespacedName: svc}, r.sliceChangeDelay())
}

// watches reports whether a change to slice matters to this controller: one of its own, or one of
// kube-controller-manager's that it takes over. kube-controller-manager writing a slice for a
// Service opted in by annotation means it saw the Service with a selector still: the slice is
// stale from the moment it lands, and the sync takes it over.
func (r *Reconciler) watches(ctx context.Context, svc types.NamespacedName, slice *discoveryv1.EndpointSlice) bool {
	if r.manages(slice, false) {
		return true
	}
	if slice.Labels[discoveryv1.LabelManagedBy] != UpstreamManagedBy {
		return false
	}
	service := &corev1.Service{}
	if err := r.Client.Get(ctx, svc, service); err != nil {
		return false
	}
	s, err := selection.Of(service, r.Options.Services)
	return err == nil && s.AdoptUpstream
}

// sliceChangeDelay is how long a sync caused by a slice change waits, as upstream: at least a
// second, so that a burst of slice events (a garbage collection, another writer) makes one sync.
func (r *Reconciler) sliceChangeDelay() time.Duration {
	return max(time.Second, r.Options.BatchPeriod)
}

func (r *Reconciler) sliceDeleted(ctx context.Context, obj client.Object, q queue) {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	svc, ok := serviceOf(slice)
	if !ok || !r.watches(ctx, svc, slice) {
		return
	}
	r.tracker.SliceGone(svc, slice.UID)
	q.AddAfter(reconcile.Request{NamespacedName: svc}, r.sliceChangeDelay())
}

// podChanged syncs the Services that select a Pod before or after the change, when the change can
// matter to an endpoint. Bursts of Pod changes fold into one sync: by a fixed batch period when one
// is set, else by coalescing.
func (r *Reconciler) podChanged(ctx context.Context, oldObj, newObj client.Object, q queue) {
	oldPod, newPod := cachedPodOf(oldObj), cachedPodOf(newObj)
	if !PodChangeMatters(oldPod, newPod) {
		return
	}
	pod := newPod
	if pod == nil {
		pod = oldPod
	}
	services := &corev1.ServiceList{}
	if err := r.Client.List(ctx, services, client.InNamespace(pod.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing Services for a Pod change", "pod", types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		return
	}
	for i := range services.Items {
		svc := &services.Items[i]
		selector := r.selectorOf(svc)
		if selector == nil {
			continue
		}
		if (oldPod != nil && selector.Matches(oldPod.Labels())) ||
			(newPod != nil && selector.Matches(newPod.Labels())) {
			r.enqueueBatched(q, types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name})
		}
	}
}

func (r *Reconciler) enqueueBatched(q queue, svc types.NamespacedName) {
	podChangesQueued.Inc()
	req := reconcile.Request{NamespacedName: svc}
	if r.Options.BatchPeriod > 0 {
		q.AddAfter(req, r.Options.BatchPeriod)
		return
	}
	// AddAfter with no delay adds at once.
	q.AddAfter(req, r.coalesce.Changed(svc, time.Now()))
}

// PodChangeMatters reports whether a Pod change (oldPod nil: created; newPod nil: deleted) can
// change an endpoint of some Service, and so is worth a sync; status-only noise such as container
// restart counts is ignored. The in-process bench's trace replay asks it as the handler does
// (CachePod makes the arguments of whole Pods).
//
// A change between two versions of which neither can be an endpoint (no IP, or a terminal phase)
// does not matter: a Deployment's new Pods are created and scheduled before they have an IP, and
// syncing for those two events (two thirds of a scale-up's Pod events) wrote nothing, while it
// split the burst of Pods becoming endpoints into more syncs.
func PodChangeMatters(oldPod, newPod *CachedPod) bool {
	if (oldPod == nil || !oldPod.Candidate) && (newPod == nil || !newPod.Candidate) {
		return false
	}
	if oldPod == nil || newPod == nil {
		return oldPod != nil || newPod != nil
	}
	return podUpdateMatters(oldPod, newPod)
}

// podUpdateMatters reports whether an update can change the Pod's endpoints or which Services
// select it: every fact of CachedPod but the Ready condition's transition time, which only dates a
// change that one of the others makes, and the resourceVersion.
func podUpdateMatters(oldPod, newPod *CachedPod) bool {
	return oldPod.labels != newPod.labels ||
		!slices.Equal(oldPod.IPs, newPod.IPs) ||
		oldPod.Candidate != newPod.Candidate ||
		oldPod.Ready != newPod.Ready ||
		oldPod.Terminating != newPod.Terminating ||
		oldPod.NodeName != newPod.NodeName ||
		oldPod.Hostname != newPod.Hostname ||
		oldPod.Subdomain != newPod.Subdomain ||
		oldPod.Namespace != newPod.Namespace || oldPod.Name != newPod.Name || oldPod.UID != newPod.UID ||
		!slices.Equal(oldPod.Ports, newPod.Ports)
}

// nodeChanged syncs the Services a Node change can affect: a new zone changes the zone of the
// endpoints on the Node; readiness, CPU, zone or role changes move every zone's share of CPU, which
// only Services with CPU-proportional hints depend on.
func (r *Reconciler) nodeChanged(ctx context.Context, oldObj, newObj client.Object, q queue) {
	oldNode, _ := oldObj.(*corev1.Node)
	newNode, _ := newObj.(*corev1.Node)
	node := newNode
	if node == nil {
		node = oldNode
	}
	if node == nil {
		return
	}
	zoneChanged := oldNode == nil || newNode == nil ||
		oldNode.Labels[corev1.LabelTopologyZone] != newNode.Labels[corev1.LabelTopologyZone]
	if zoneChanged {
		r.enqueueServicesOnNode(ctx, node.Name, q)
	}
	if zoneChanged || nodeShareChanged(oldNode, newNode) {
		r.enqueueAutoTopologyServices(ctx, q)
	}
}

// nodeShareChanged reports whether a Node update changes what it adds to its zone's CPU share.
func nodeShareChanged(oldNode, newNode *corev1.Node) bool {
	_, oldCP := oldNode.Labels[topology.LabelControlPlane]
	_, newCP := newNode.Labels[topology.LabelControlPlane]
	return nodeReady(oldNode) != nodeReady(newNode) || oldCP != newCP ||
		!oldNode.Status.Allocatable.Cpu().Equal(*newNode.Status.Allocatable.Cpu())
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// enqueueAutoTopologyServices syncs every Service with CPU-proportional hints.
func (r *Reconciler) enqueueAutoTopologyServices(ctx context.Context, q queue) {
	services := &corev1.ServiceList{}
	if err := r.Client.List(ctx, services, client.MatchingFields{serviceModeIndex: string(hints.Auto)}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing Services with topology hints for a Node change")
		return
	}
	for i := range services.Items {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&services.Items[i])})
	}
}

// enqueueServicesOnNode syncs every Service selecting a Pod on the Node, listing each namespace's
// Services once rather than once per Pod.
func (r *Reconciler) enqueueServicesOnNode(ctx context.Context, nodeName string, q queue) {
	pods, err := r.podsOnNode(ctx, nodeName)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing Pods on a changed Node", "node", nodeName)
		return
	}
	byNamespace := map[string][]labels.Labels{}
	for _, p := range pods {
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p.Labels())
	}
	for ns, podLabels := range byNamespace {
		services := &corev1.ServiceList{}
		if err := r.Client.List(ctx, services, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			log.FromContext(ctx).Error(err, "listing Services for a changed Node", "node", nodeName, "namespace", ns)
			continue
		}
		for i := range services.Items {
			svc := &services.Items[i]
			selector := r.selectorOf(svc)
			if selector == nil {
				continue
			}
			for _, l := range podLabels {
				if selector.Matches(l) {
					q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(svc)})
					break
				}
			}
		}
	}
}
