package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"time"

	"github.com/fleetslice/fleetslice/controllers/topology"
)

// EventKind is what changes in one dynamic step.
type EventKind int

const (
	AddEndpoint EventKind = iota
	RemoveEndpoint
	AddNode
	RemoveNode
)

// Event is one change of the world: an endpoint with ID appears in or leaves Zone, or Zone gains
// or loses one Node.
type Event struct {
	Kind EventKind
	Zone int
	ID   int
}

// world is the simulated cluster the events apply to, shared by every algorithm replaying them.
type world struct {
	nodes     [Zones]int
	endpoints []simEndpoint // in creation order, which every replayer keeps
	nextID    int
}

type simEndpoint struct {
	id   int
	zone int
}

func newWorld(c Case) *world {
	w := &world{nodes: c.Nodes}
	for z := range Zones {
		for range c.Endpoints[z] {
			w.endpoints = append(w.endpoints, simEndpoint{id: w.nextID, zone: z})
			w.nextID++
		}
	}
	return w
}

// maxNodesPerZone keeps random walks of Node counts inside the published range of sizes.
const maxNodesPerZone = 30

// randomEvent draws the next event: endpoint additions and removals are equally likely and
// together three times as likely as a Node change; every zone keeps at least one Node, so the
// cluster never loses a zone and only hint decisions, not their preconditions, are compared.
func (w *world) randomEvent(r *rand.Rand) Event {
	zone := r.IntN(Zones)
	switch x := r.IntN(8); {
	case x < 3 || (x < 6 && len(w.endpoints) == 0):
		return Event{Kind: AddEndpoint, Zone: zone, ID: w.nextID}
	case x < 6:
		ep := w.endpoints[r.IntN(len(w.endpoints))]
		return Event{Kind: RemoveEndpoint, Zone: ep.zone, ID: ep.id}
	case x == 6 && w.nodes[zone] < maxNodesPerZone:
		return Event{Kind: AddNode, Zone: zone}
	case w.nodes[zone] > 1:
		return Event{Kind: RemoveNode, Zone: zone}
	}
	return Event{Kind: AddNode, Zone: zone}
}

func (w *world) apply(ev Event) {
	switch ev.Kind {
	case AddEndpoint:
		w.endpoints = append(w.endpoints, simEndpoint{id: ev.ID, zone: ev.Zone})
		w.nextID++
	case RemoveEndpoint:
		for i, ep := range w.endpoints {
			if ep.id == ev.ID {
				w.endpoints = append(w.endpoints[:i], w.endpoints[i+1:]...)
				break
			}
		}
	case AddNode:
		w.nodes[ev.Zone]++
	case RemoveNode:
		w.nodes[ev.Zone]--
	}
}

func (w *world) snapshot() Case {
	c := Case{Nodes: w.nodes}
	for _, ep := range w.endpoints {
		c.Endpoints[ep.zone]++
	}
	return c
}

// replayer keeps one algorithm's hints across the events of one case.
type replayer interface {
	// reset starts a new case in w.
	reset(w *world)
	// step applies ev (already applied to w) and returns the hints by endpoint id (nil: none)
	// and how many endpoints present before and after changed hint.
	step(w *world, ev Event) (hints map[int]int, changed int)
}

// DynamicConfig is one dynamic run.
type DynamicConfig struct {
	Threshold           float64
	MinEndpointsPerZone int
	// Cases start states are sampled evenly from the published space.
	Cases int
	// Steps random events are applied per case.
	Steps   int
	Seed    uint64
	Workers int
}

// DynamicStats aggregate one algorithm's replay.
type DynamicStats struct {
	Algorithm string
	Threshold float64
	Cases     int
	Events    int
	// HintChanges counts endpoints, present before and after an event, whose hint changed.
	HintChanges int
	// Toggles counts events that switched hints on or off.
	Toggles int
	// HintedSteps counts events after which the Service had hints.
	HintedSteps int
	// OverSteps counts events after which some endpoint expected more than (1+Threshold) times
	// its fair share.
	OverSteps   int
	MaxOverload float64
	InZoneSum   float64
	Elapsed     time.Duration
}

func (d *DynamicStats) merge(o DynamicStats) {
	d.Cases += o.Cases
	d.Events += o.Events
	d.HintChanges += o.HintChanges
	d.Toggles += o.Toggles
	d.HintedSteps += o.HintedSteps
	d.OverSteps += o.OverSteps
	d.MaxOverload = max(d.MaxOverload, o.MaxOverload)
	d.InZoneSum += o.InZoneSum
}

// replayers is how many algorithms a dynamic run compares.
const replayers = 3

// FleetsliceStateless names fleetslice's allocator run without its previous hints and state.
const FleetsliceStateless = "fleetslice-stateless"

// RunDynamic replays the same seeded random event sequences through fleetslice's allocator
// (feeding back its previous hints and state), through upstream's TopologyCache (kept across
// events like its controller keeps it) and through fleetslice's allocator without memory, and
// returns their stats in that order.
func RunDynamic(ctx context.Context, cfg DynamicConfig) ([]DynamicStats, error) {
	start := time.Now()
	if cfg.Threshold < 0 || cfg.Cases <= 0 || cfg.Steps <= 0 {
		return nil, fmt.Errorf("dynamic run needs a non-negative threshold and positive cases and steps")
	}
	starts := make([]Case, 0, cfg.Cases)
	pick := sampler{n: cfg.Cases, total: CaseCount()}
	i := 0
	ForEachCase(func(c Case) {
		if pick.picks(i) {
			starts = append(starts, c)
		}
		i++
	})
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	opts := topology.DefaultOptions()
	opts.OverloadThreshold = cfg.Threshold
	if cfg.MinEndpointsPerZone > 0 {
		opts.MinEndpointsPerZone = cfg.MinEndpointsPerZone
	}
	results := make([][replayers]DynamicStats, len(starts))
	type worker struct {
		algs       [replayers]replayer
		thresholds [replayers]float64
	}
	newWorker := func() worker {
		return worker{
			algs:       [replayers]replayer{newOursReplayer(opts, false), newUpstreamReplayer(), newOursReplayer(opts, true)},
			thresholds: [replayers]float64{cfg.Threshold, UpstreamThreshold, cfg.Threshold},
		}
	}
	err := parallelFor(ctx, len(starts), workers, newWorker, func(w worker, i int) {
		for a := range w.algs {
			results[i][a] = replayCase(starts[i], cfg, uint64(i), w.algs[a], w.thresholds[a])
		}
	})
	out := []DynamicStats{
		{Algorithm: Fleetslice, Threshold: cfg.Threshold},
		{Algorithm: Upstream, Threshold: UpstreamThreshold},
		{Algorithm: FleetsliceStateless, Threshold: cfg.Threshold},
	}
	for i := range results {
		for a := range out {
			out[a].merge(results[i][a])
		}
	}
	for i := range out {
		out[i].Elapsed = time.Since(start)
	}
	return out, err
}

// replayCase runs one case's event sequence, the same for every algorithm because the random
// source depends only on the seed and the case.
func replayCase(c Case, cfg DynamicConfig, caseIndex uint64, alg replayer, threshold float64) DynamicStats {
	r := rand.New(rand.NewPCG(cfg.Seed, caseIndex))
	w := newWorld(c)
	alg.reset(w)
	st := DynamicStats{Cases: 1}
	wasHinted := false
	first := true
	var plan Plan
	for range cfg.Steps {
		ev := w.randomEvent(r)
		w.apply(ev)
		hints, changed := alg.step(w, ev)
		snap := w.snapshot()
		st.Events++
		st.HintChanges += changed
		var out Outcome
		if hints != nil {
			plan = Plan{}
			for _, ep := range w.endpoints {
				plan[ep.zone*Zones+hints[ep.id]]++
			}
			out = Evaluate(snap, &plan)
			st.HintedSteps++
		} else {
			out = Evaluate(snap, nil)
		}
		if !first && (hints != nil) != wasHinted {
			st.Toggles++
		}
		first, wasHinted = false, hints != nil
		if out.MaxOverload > threshold+1e-9 {
			st.OverSteps++
		}
		st.MaxOverload = max(st.MaxOverload, out.MaxOverload)
		st.InZoneSum += out.InZone
	}
	return st
}

// oursReplayer feeds fleetslice's allocator its previous hints and on/off state.
type oursReplayer struct {
	// stateless forgets the previous hints and state, as if every event hit a new Service: the
	// baseline that shows what laziness and hysteresis save and what they cost in-zone.
	stateless bool
	opts      topology.Options
	planner   topology.Planner
	zones     []topology.Zone
	eps       []topology.Endpoint
	hints     map[int]int // by endpoint id; nil when off
	enabled   bool
}

func newOursReplayer(opts topology.Options, stateless bool) *oursReplayer {
	zones := make([]topology.Zone, Zones)
	for z := range Zones {
		zones[z].Name = zoneNames[z]
	}
	return &oursReplayer{opts: opts, zones: zones, stateless: stateless}
}

func (o *oursReplayer) reset(w *world) {
	o.hints, o.enabled = nil, false
	o.step(w, Event{Kind: -1})
}

func (o *oursReplayer) step(w *world, ev Event) (map[int]int, int) {
	for z := range Zones {
		o.zones[z].MilliCPU = int64(w.nodes[z]) * 1000
	}
	o.eps = o.eps[:0]
	for _, ep := range w.endpoints {
		e := topology.Endpoint{Key: strconv.Itoa(ep.id), Zone: zoneNames[ep.zone]}
		if h, ok := o.hints[ep.id]; ok && !o.stateless {
			e.Hint = zoneNames[h]
		}
		o.eps = append(o.eps, e)
	}
	opts := o.opts
	opts.EnabledBefore = o.enabled && !o.stateless
	res := topology.AllocateWith(&o.planner, o.zones, o.eps, opts)
	o.enabled = res.Enabled
	var next map[int]int
	if res.Enabled {
		next = make(map[int]int, len(w.endpoints))
		for i, ep := range w.endpoints {
			next[ep.id] = zoneIndex(res.Hints[i])
		}
	}
	changed := countChanged(w, ev, o.hints, next)
	o.hints = next
	return next, changed
}

// countChanged counts endpoints that existed before ev and still exist whose hint (or lack of
// one) differs between old and next.
func countChanged(w *world, ev Event, old, next map[int]int) int {
	changed := 0
	for _, ep := range w.endpoints {
		if ev.Kind == AddEndpoint && ep.id == ev.ID {
			continue
		}
		a, okA := old[ep.id]
		b, okB := next[ep.id]
		if okA != okB || a != b {
			changed++
		}
	}
	return changed
}
