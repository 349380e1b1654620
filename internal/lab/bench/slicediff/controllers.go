package slicediff

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	upstream "k8s.io/endpointslice"
	"k8s.io/endpointslice/topologycache"
	upstreamutil "k8s.io/endpointslice/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

// Controller names as the tables print them.
const (
	Upstream   = "upstream"
	Fleetslice = "fleetslice"
)

// controller is one EndpointSlice controller under test, bound to its own store.
type controller interface {
	// managedBy is the managed-by label of the slices it writes.
	managedBy() string
	// nodeStored and nodesChanged do what the controller's Node event handlers do besides
	// queueing syncs.
	nodeStored(*corev1.Node)
	nodesChanged()
	// sync reconciles the measured Service once, the way the controller's worker does.
	sync(ctx context.Context) error
}

// fleetsliceController runs fleetslice's reconciler against the store.
type fleetsliceController struct {
	reconciler *endpointslice.Reconciler
}

func newFleetslice(s *store) (*fleetsliceController, error) {
	r, err := endpointslice.NewReconciler(newStoreClient(s), &events.FakeRecorder{}, endpointslice.DefaultOptions())
	if err != nil {
		return nil, err
	}
	return &fleetsliceController{reconciler: r}, nil
}

func (*fleetsliceController) managedBy() string       { return endpointslice.ManagedBy }
func (*fleetsliceController) nodeStored(*corev1.Node) {}
func (*fleetsliceController) nodesChanged()           {}

func (c *fleetsliceController) sync(ctx context.Context) error {
	ctx = log.IntoContext(ctx, logr.Discard())
	_, err := c.reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: serviceKey})
	return err
}

// upstreamController runs k8s.io/endpointslice's reconciler the way kube-controller-manager's
// controller drives it: Pods and slices from listers, a stale-cache check through the slice
// tracker, trigger times from the trigger-time tracker, Node changes fed to the topology cache,
// and slice deletions delivered to the tracker as the informer would deliver them, after the
// sync that made them.
type upstreamController struct {
	store       *store
	reconciler  *upstream.Reconciler
	tracker     *upstreamutil.EndpointSliceTracker
	triggers    *upstreamutil.TriggerTimeTracker
	topology    *topologycache.TopologyCache
	nodeIndexer cache.Indexer
	deleted     []*discoveryv1.EndpointSlice
}

// errStaleCache means the tracker saw slices older than upstream's own writes, which the store
// makes impossible; it would mean the harness fed upstream an inconsistent world.
var errStaleCache = errors.New("upstream's EndpointSlice tracker reports a stale cache")

func newUpstream(s *store) *upstreamController {
	c := &upstreamController{
		store:       s,
		tracker:     upstreamutil.NewEndpointSliceTracker(),
		triggers:    upstreamutil.NewTriggerTimeTracker(),
		topology:    topologycache.NewTopologyCache(),
		nodeIndexer: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
	}
	// A bare fake clientset: every EndpointSlice request is answered by the store, and any
	// other request fails, since upstream's reconciler makes none.
	clientset := &fake.Clientset{}
	clientset.PrependReactor("*", "*", c.serve)
	s.sliceDeleted = func(slice *discoveryv1.EndpointSlice) { c.deleted = append(c.deleted, slice) }
	c.reconciler = upstream.NewReconciler(clientset, corelisters.NewNodeLister(c.nodeIndexer), maxPerSlice,
		c.tracker, c.topology, &record.FakeRecorder{}, endpointslice.UpstreamManagedBy,
		upstream.WithPreferSameTrafficDistributionEnabled(true))
	return c
}

func (c *upstreamController) serve(action k8stesting.Action) (bool, runtime.Object, error) {
	if action.GetResource().Resource != "endpointslices" {
		return true, nil, fmt.Errorf("upstream's reconciler sent an unexpected %s of %s", action.GetVerb(), action.GetResource().Resource)
	}
	// Switch on the verb: an UpdateAction also satisfies the CreateAction interface.
	switch action.GetVerb() {
	case "create", "update":
		a, ok := action.(interface{ GetObject() runtime.Object })
		if !ok {
			break
		}
		slice, ok := a.GetObject().(*discoveryv1.EndpointSlice)
		if !ok {
			return true, nil, fmt.Errorf("%s of %T", action.GetVerb(), a.GetObject())
		}
		if action.GetVerb() == "create" {
			out, err := c.store.createSlice(slice)
			return true, out, err
		}
		out, err := c.store.updateSlice(slice)
		return true, out, err
	case "delete":
		a, ok := action.(k8stesting.DeleteAction)
		if !ok {
			break
		}
		var uid *types.UID
		if pre := a.GetDeleteOptions().Preconditions; pre != nil {
			uid = pre.UID
		}
		key := types.NamespacedName{Namespace: a.GetNamespace(), Name: a.GetName()}
		return true, nil, c.store.deleteSlice(key, uid)
	}
	return true, nil, fmt.Errorf("upstream's reconciler sent an unexpected %s", action.GetVerb())
}

func (*upstreamController) managedBy() string { return endpointslice.UpstreamManagedBy }

func (c *upstreamController) nodeStored(node *corev1.Node) {
	// The indexer only fails for objects without a key; a Node always has one.
	_ = c.nodeIndexer.Update(node)
}

func (c *upstreamController) nodesChanged() {
	c.topology.SetNodes(logr.Discard(), c.store.allNodes())
}

func (c *upstreamController) sync(context.Context) error {
	svc := c.store.services.get(serviceKey)
	if svc == nil {
		return nil
	}
	selector := labels.SelectorFromValidatedSet(svc.Spec.Selector)
	var pods []*corev1.Pod
	c.store.pods.each(func(p *corev1.Pod) {
		if p.Namespace == svc.Namespace && selector.Matches(labels.Set(p.Labels)) {
			pods = append(pods, p)
		}
	})
	var slices []*discoveryv1.EndpointSlice
	for _, s := range c.store.slicesOf(serviceKey, endpointslice.UpstreamManagedBy) {
		if s.DeletionTimestamp == nil {
			slices = append(slices, s)
		}
	}
	if c.tracker.StaleSlices(svc, slices) {
		return errStaleCache
	}
	trigger := c.triggers.ComputeEndpointLastChangeTriggerTime(svc.Namespace, svc, pods)
	err := c.reconciler.Reconcile(logr.Discard(), svc, pods, slices, trigger)
	for _, s := range c.deleted {
		if c.tracker.Has(s) {
			c.tracker.HandleDeletion(s)
		}
	}
	c.deleted = c.deleted[:0]
	return err
}
