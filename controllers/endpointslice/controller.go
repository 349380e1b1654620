// Package endpointslice is fleetslice's EndpointSlice controller: it turns Services, the Pods they
// select and the Nodes those Pods run on into size-capped EndpointSlices, with the semantics of
// kube-controller-manager's controller and fewer API writes.
//
// The decisions are pure: endpoints (what must exist) and placement (which slice each endpoint
// goes to), which Services are served (selection) and their hints (hints, over
// controllers/topology) are sub-packages, and the whole sync's plan (planSync) is a pure function
// here. Reconcile reads the cluster, calls planSync once, and writes the plan it returns:
// creates, then updates, then deletes.
package endpointslice

import (
	"fmt"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/coalesce"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/placement"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// ControllerName names this controller in logs, events and metrics.
const ControllerName = "endpointslice"

// Options configure the controller; the manager exposes each as a flag.
type Options struct {
	// MaxEndpointsPerSlice caps each slice, 1..1000 (upstream's default is 100).
	MaxEndpointsPerSlice int
	// CompactionSlack is how many slices above ceil(endpoints/max) a slice set may have before
	// compaction merges the emptiest away.
	CompactionSlack int
	// BatchPeriod delays every Pod-triggered sync by a fixed time, as kube-controller-manager's
	// --endpointslice-updates-batch-period; above 0 it replaces coalescing.
	BatchPeriod time.Duration
	// CoalesceQuiet, CoalesceWindow and CoalesceBudget coalesce a Service's Pod changes while it
	// is under churn: a change after a quiet spell of CoalesceQuiet syncs at once; a burst waits
	// until it has been quiet for CoalesceQuiet, or for CoalesceWindow, stretched when the
	// Service's previous sync took longer (coalesce.Config.BurstWindow), and never longer than
	// CoalesceBudget (--endpoint-updates-max-delay). Budget 0 turns it off.
	CoalesceQuiet, CoalesceWindow, CoalesceBudget time.Duration
	// Concurrency is the number of Services synced in parallel.
	Concurrency int
	// AdoptUpstreamSlices takes over slices kube-controller-manager's controller left behind.
	AdoptUpstreamSlices bool
	// Services chooses the Services served: all (kube-controller-manager's controller off) or
	// only those opted in with SelectorAnnotation (it stays on).
	Services ServiceScope
	// Topology tunes CPU-proportional hints for Services annotated topology-mode: Auto.
	Topology topology.Options
}

// Coalescing defaults, chosen from the endpointslice-e2e bench (docs/benchmarks.md), where both
// controllers write slices for the same Service in one cluster. At real-cluster client limits
// kube-controller-manager's controller syncs a rolling Service about 11 times a second, and a
// growing Deployment's slices as often as its client limit, shared with the ReplicaSet
// controller, lets it, so the window trades writes against latency directly (2026-12-03, 3
// rollouts and a scale-up each): 200 ms wrote 0.61x its rollout writes and 0.77x its scale-up
// writes at 0.92x its p99 network programming latency; 150 ms 0.66x and 1.08x at 0.91x (the
// scale-up's writes were 0.62x to 0.89x of upstream's in five earlier runs, which vary with its
// limiter). With the cluster's own components unlimited (an overloaded API server) 200 ms wrote
// 0.74x at 0.58x the p99, 150 ms 0.66x at 0.71x.
const (
	DefaultCoalesceQuiet  = 100 * time.Millisecond
	DefaultCoalesceWindow = 200 * time.Millisecond
	DefaultCoalesceBudget = time.Second
)

// DefaultOptions match upstream's defaults, plus coalescing.
func DefaultOptions() Options {
	return Options{
		MaxEndpointsPerSlice: placement.DefaultMaxEndpointsPerSlice, CompactionSlack: placement.DefaultCompactionSlack,
		Concurrency: 5, Services: ScopeAll,
		CoalesceQuiet: DefaultCoalesceQuiet, CoalesceWindow: DefaultCoalesceWindow, CoalesceBudget: DefaultCoalesceBudget,
		Topology: topology.DefaultOptions(),
	}
}

// Validate rejects options the controller cannot run with.
func (o Options) Validate() error {
	switch {
	case o.MaxEndpointsPerSlice < 1 || o.MaxEndpointsPerSlice > placement.MaxEndpointsPerSliceLimit:
		return fmt.Errorf("--max-endpoints-per-slice must be within 1..%d, got %d", placement.MaxEndpointsPerSliceLimit, o.MaxEndpointsPerSlice)
	case o.CompactionSlack < 0:
		return fmt.Errorf("--endpointslice-compaction-slack must not be negative, got %d", o.CompactionSlack)
	case o.BatchPeriod < 0:
		return fmt.Errorf("--endpoint-updates-batch-period must not be negative, got %s", o.BatchPeriod)
	case o.CoalesceQuiet < 0 || o.CoalesceWindow < 0 || o.CoalesceBudget < 0:
		return fmt.Errorf("--endpoint-updates-quiet-period, --endpoint-updates-window and --endpoint-updates-max-delay must not be negative, got %s, %s and %s",
			o.CoalesceQuiet, o.CoalesceWindow, o.CoalesceBudget)
	case o.CoalesceBudget > 0 && o.CoalesceWindow == 0:
		return fmt.Errorf("--endpoint-updates-window must be above 0 while --endpoint-updates-max-delay (%s) is", o.CoalesceBudget)
	case o.CoalesceBudget > 0 && o.CoalesceQuiet > o.CoalesceBudget:
		return fmt.Errorf("--endpoint-updates-quiet-period (%s) must not exceed --endpoint-updates-max-delay (%s)", o.CoalesceQuiet, o.CoalesceBudget)
	case o.Services != ScopeAll && o.Services != ScopeOptedIn:
		return fmt.Errorf("--endpointslice-services must be %q or %q, got %q", ScopeAll, ScopeOptedIn, o.Services)
	case o.Services == ScopeOptedIn && o.AdoptUpstreamSlices:
		return fmt.Errorf("--adopt-upstream-slices would take kube-controller-manager's slices while it still writes them; it needs --endpointslice-services=%s", ScopeAll)
	case o.Concurrency < 1:
		return fmt.Errorf("--concurrent-endpointslice-syncs must be at least 1, got %d", o.Concurrency)
	}
	return o.Topology.Validate()
}

// Reconciler syncs one Service's EndpointSlices per call.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Options  Options

	tracker  *sliceTracker
	totals   serviceTotals
	coalesce *coalesce.Coalescer
	// pods is the Pod informer's index when SetupWithManager found one: a sync then reads the
	// cached Pods in place instead of copying each into a list (see selectedPods).
	pods toolscache.Indexer

	triggerMu sync.Mutex
	triggers  map[types.NamespacedName]*endpoints.TriggerState

	hintMu     sync.Mutex
	hintStates map[hintKey]string
}

// hintKey names one address type of one Service, whose hint state events report on.
type hintKey struct {
	service     types.NamespacedName
	addressType discoveryv1.AddressType
}

// NewReconciler builds a Reconciler; call SetupWithManager to start it.
func NewReconciler(c client.Client, recorder events.EventRecorder, opts Options) (*Reconciler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Reconciler{
		Client:     c,
		Recorder:   recorder,
		Options:    opts,
		tracker:    newSliceTracker(),
		coalesce:   coalesce.New(opts.CoalesceConfig()),
		triggers:   map[types.NamespacedName]*endpoints.TriggerState{},
		hintStates: map[hintKey]string{},
	}, nil
}

// manages reports whether a slice is one this controller writes: its own, and
// kube-controller-manager's when it takes those over, for every Service
// (Options.AdoptUpstreamSlices) or for this slice's (adoptUpstream).
func (r *Reconciler) manages(slice *discoveryv1.EndpointSlice, adoptUpstream bool) bool {
	switch slice.Labels[discoveryv1.LabelManagedBy] {
	case ManagedBy:
		return true
	case UpstreamManagedBy:
		return r.Options.AdoptUpstreamSlices || adoptUpstream
	}
	return false
}

// serviceOf returns the Service a slice belongs to, by its service-name label.
func serviceOf(slice *discoveryv1.EndpointSlice) (types.NamespacedName, bool) {
	name := slice.Labels[discoveryv1.LabelServiceName]
	return types.NamespacedName{Namespace: slice.Namespace, Name: name}, name != ""
}

// CoalesceConfig is the coalescing in force: none when a fixed batch period is set. A window
// above the max delay is cut to it (coalesce.Config.BurstWindow), so lowering
// --endpoint-updates-max-delay alone is enough to bound every wait.
func (o Options) CoalesceConfig() coalesce.Config {
	cfg := coalesce.Config{Quiet: o.CoalesceQuiet, Window: o.CoalesceWindow, MaxDelay: o.CoalesceBudget}
	if o.BatchPeriod > 0 {
		cfg.MaxDelay = 0
	}
	return cfg
}
