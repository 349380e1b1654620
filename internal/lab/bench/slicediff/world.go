package slicediff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// Point is the state after one sync of a scenario.
type Point struct {
	// Events is how many Pod, Node and Service changes the scenario had made.
	Events int
	// Writes is the cumulative number of API writes; Slices is the slice count.
	Writes int64
	Slices int
}

// SideResult is one controller's figures for one scenario.
type SideResult struct {
	Controller string
	Events     int
	Syncs      int
	Writes     Writes
	// PeakSlices and FinalSlices count the Service's slices after syncs; FinalEndpoints counts
	// its endpoints at the end.
	PeakSlices, FinalSlices, FinalEndpoints int
	// MaxExcessSlices is the largest number of slices beyond ceil(endpoints/100) seen after a sync.
	MaxExcessSlices int
	// CPU is the process CPU time spent inside syncs; Allocs and AllocBytes the heap
	// allocations they made.
	CPU                time.Duration
	Allocs, AllocBytes uint64
	// Delays are, streaming, how long each change waited for the end of the sync that took it
	// in; LongestSync is the longest a sync took in scenario time.
	Delays      []time.Duration
	LongestSync time.Duration
	// Series has one Point per sync, for the scenarios that plot.
	Series []Point
	// Failures are broken invariants, at most one per kind, with the sync they appeared in.
	Failures map[string]string
}

// world drives one scenario through one controller: it applies the scenario's changes to the
// store, syncs after every batch of changes, measures the syncs and checks the result of each.
type world struct {
	ctx        context.Context
	store      *store
	controller controller
	nodes      int
	clock      time.Time

	// batch is how many changes make one sync; 0 syncs only when the scenario says so (or,
	// streaming, when the controller's own coalescing says so).
	batch     int
	streaming streaming
	measuring bool
	series    bool
	pending   int
	sliceCap  int // fleetslice's bound on slices beyond ceil(n/100); -1: none
	result    SideResult
	records   map[int]*podRecord
	nextSeq   int
}

func newWorld(ctx context.Context, name string, nodes int) (*world, error) {
	w := &world{ctx: ctx, store: newStore(epoch), nodes: nodes, clock: epoch,
		sliceCap: -1, records: map[int]*podRecord{}}
	w.result.Controller = name
	w.result.Failures = map[string]string{}
	switch name {
	case Upstream:
		w.controller = newUpstream(w.store)
	case Fleetslice:
		c, err := newFleetslice(w.store)
		if err != nil {
			return nil, err
		}
		w.controller = c
		w.sliceCap = 1 // the default compaction slack
	default:
		return nil, fmt.Errorf("unknown controller %q", name)
	}
	return w, nil
}

// advance moves the scenario's clock, which stamps readiness transitions and deletions; streaming,
// the syncs due before then run first, at their own times.
func (w *world) advance(to time.Time) {
	w.streaming.runDue(w, to)
	w.moveClock(to)
}

// moveClock moves the scenario's clock, and the store's with it, forward to to.
func (w *world) moveClock(to time.Time) {
	if to.After(w.clock) {
		w.clock = to
		w.store.now = to
	}
}

func (w *world) changed() {
	w.result.Events++
	w.pending++
	if w.streaming.on {
		w.streaming.changed(w)
		return
	}
	if w.batch > 0 && w.pending >= w.batch {
		w.sync()
	}
}

// newPod records a Pod of revision rev in stage pending.
func (w *world) newPod(rev int) *podRecord {
	w.nextSeq++
	r := &podRecord{seq: w.nextSeq, rev: rev, stage: podPending, since: w.clock}
	w.records[r.seq] = r
	return r
}

// setPod moves a Pod to a stage and stores the changed Pod.
func (w *world) setPod(r *podRecord, stage podStage) {
	wasReady := r.stage == podReady || r.stage == podTerminating
	isReady := stage == podReady || stage == podTerminating
	if wasReady != isReady {
		r.since = w.clock
	}
	if (stage == podTerminating || stage == podStopping) && r.deleted.IsZero() {
		r.deleted = w.clock
	}
	r.stage = stage
	w.store.putPod(r.object(w.nodes))
	w.changed()
}

// removePod finishes a Pod's deletion.
func (w *world) removePod(r *podRecord) {
	delete(w.records, r.seq)
	w.store.deletePod(r.key())
	w.changed()
}

func (w *world) putNode(node *corev1.Node) {
	w.store.putNode(node)
	w.controller.nodeStored(node)
	w.changed()
}

func (w *world) putService(svc *corev1.Service) {
	w.store.putService(svc)
	w.changed()
}

// flush syncs if anything changed since the last sync.
func (w *world) flush() {
	if w.pending > 0 {
		w.sync()
	}
}

// startMeasuring ends the scenario's setup: the starting state is synced, and from here on
// events, writes and syncs count, with a sync after every batch changes (0: only on flush).
func (w *world) startMeasuring(batch int) {
	w.controller.nodesChanged()
	w.sync()
	w.store.writes = Writes{}
	w.result.Events, w.result.Syncs = 0, 0
	w.result.PeakSlices = len(w.store.slicesOf(serviceKey, w.controller.managedBy()))
	w.measuring = true
	w.batch = batch
	runtime.GC()
}

func (w *world) sync() {
	w.pending = 0
	w.streaming.synced()
	if err := w.ctx.Err(); err != nil {
		w.fail("sync", err.Error())
		return
	}
	var before, after runtime.MemStats
	if w.measuring {
		runtime.ReadMemStats(&before)
	}
	start := cpuTime()
	err := w.controller.sync(w.ctx)
	spent := cpuTime() - start
	if w.measuring {
		runtime.ReadMemStats(&after)
		w.result.Syncs++
		w.result.CPU += spent
		w.result.Allocs += after.Mallocs - before.Mallocs
		w.result.AllocBytes += after.TotalAlloc - before.TotalAlloc
	}
	if err != nil {
		w.fail("sync", err.Error())
	}
	w.verify()
}

func (w *world) fail(kind, msg string) {
	if _, seen := w.result.Failures[kind]; !seen {
		w.result.Failures[kind] = fmt.Sprintf("sync %d after %d events: %s", w.result.Syncs, w.result.Events, msg)
	}
}

// verify checks the controller's slices against the Pods the harness itself considers
// endpoints: every endpoint exactly once with the Pod's readiness and its Node's zone, no slice
// over the cap, and fleetslice's bound on the slice count.
func (w *world) verify() {
	slices := w.store.slicesOf(serviceKey, w.controller.managedBy())
	if w.store.services.get(serviceKey) == nil {
		if len(slices) > 0 {
			w.fail("endpoints", "slices exist without a Service")
		}
		return
	}
	want := map[string]bool{} // address -> ready
	w.store.pods.each(func(p *corev1.Pod) {
		if p.Status.PodIP == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			return
		}
		ready := p.DeletionTimestamp == nil && len(p.Status.Conditions) > 0 && p.Status.Conditions[0].Status == corev1.ConditionTrue
		want[p.Status.PodIP] = ready
	})
	seen := make(map[string]bool, len(want))
	for _, s := range slices {
		if len(s.Endpoints) > maxPerSlice {
			w.fail("cap", fmt.Sprintf("slice %s holds %d endpoints", s.Name, len(s.Endpoints)))
		}
		for i := range s.Endpoints {
			w.checkEndpoint(&s.Endpoints[i], want, seen)
		}
	}
	if len(seen) != len(want) {
		w.fail("endpoints", fmt.Sprintf("%d of %d endpoints listed", len(seen), len(want)))
	}
	ideal := max(1, (len(want)+maxPerSlice-1)/maxPerSlice)
	excess := len(slices) - ideal
	if w.sliceCap >= 0 && excess > w.sliceCap {
		w.fail("bound", fmt.Sprintf("%d slices for %d endpoints, more than ceil(n/%d)+%d", len(slices), len(want), maxPerSlice, w.sliceCap))
	}
	if !w.measuring {
		return
	}
	w.result.MaxExcessSlices = max(w.result.MaxExcessSlices, excess)
	w.result.PeakSlices = max(w.result.PeakSlices, len(slices))
	w.result.FinalSlices, w.result.FinalEndpoints = len(slices), len(want)
	if w.series {
		w.result.Series = append(w.result.Series, Point{Events: w.result.Events, Writes: w.store.writes.Total(), Slices: len(slices)})
	}
}

func (w *world) checkEndpoint(ep *discoveryv1.Endpoint, want, seen map[string]bool) {
	if len(ep.Addresses) != 1 {
		w.fail("endpoints", fmt.Sprintf("endpoint with addresses %v", ep.Addresses))
		return
	}
	addr := ep.Addresses[0]
	ready, ok := want[addr]
	switch {
	case !ok:
		w.fail("endpoints", fmt.Sprintf("endpoint %s is not a Pod's address", addr))
	case seen[addr]:
		w.fail("endpoints", fmt.Sprintf("endpoint %s listed twice", addr))
	case ep.Conditions.Ready == nil || *ep.Conditions.Ready != ready:
		w.fail("endpoints", fmt.Sprintf("endpoint %s ready=%v, Pod says %v", addr, ptr.Deref(ep.Conditions.Ready, false), ready))
	}
	seen[addr] = true
	if ep.NodeName == nil {
		w.fail("zones", fmt.Sprintf("endpoint %s has no node", addr))
		return
	}
	node := w.store.nodes.get(nodeKey(*ep.NodeName))
	if node == nil || ep.Zone == nil || *ep.Zone != node.Labels[corev1.LabelTopologyZone] {
		w.fail("zones", fmt.Sprintf("endpoint %s on %s has zone %q, not its Node's", addr, *ep.NodeName, ptr.Deref(ep.Zone, "")))
	}
}

// cpuTime is the CPU the process has used, user and system. It includes the garbage collector's
// background work, which a sync's allocations cause as surely as its own instructions.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RunScenario replays a scenario through one controller (Upstream or Fleetslice) and returns
// its figures. Broken invariants are in the result's Failures; an error means no figures.
func RunScenario(ctx context.Context, sc Scenario, sz Size, controllerName string) (SideResult, error) {
	if err := sz.validate(); err != nil {
		return SideResult{}, err
	}
	w, err := newWorld(ctx, controllerName, sz.Nodes)
	if err != nil {
		return SideResult{}, err
	}
	w.series = sc.Plot
	sc.run(w, sz, rand.New(rand.NewPCG(1, seedFor(sc.Name))))
	if err := ctx.Err(); err != nil {
		return SideResult{}, err
	}
	w.result.Writes = w.store.writes
	w.result.Delays = w.streaming.delays
	w.result.LongestSync = w.streaming.longestSync
	return w.result, nil
}
