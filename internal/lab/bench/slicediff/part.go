// Package slicediff is the `endpointslice` part of `fleetslice bench`: the same scripted streams
// of Pod, Node and Service changes are fed to fleetslice's EndpointSlice reconciler and to
// upstream's (k8s.io/endpointslice used as a library, driven the way kube-controller-manager
// drives it), each writing to its own in-memory API store that counts writes and bytes. After
// every sync the store is exactly what the next sync reads, and the harness checks the slices
// against the Pods.
package slicediff

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// Watchers is how many watchers receive every EndpointSlice watch event: one proxy per node of
// a 5,000-node cluster.
const Watchers = 5_000

// ScenarioResult is both controllers' figures for one scenario.
type ScenarioResult struct {
	Scenario    Scenario
	Description string
	// Upstream and Fleetslice are the two sides.
	Upstream, Fleetslice SideResult
}

type partOptions struct {
	scenarios []string
}

// Part is the `endpointslice` benchmark.
func Part() bench.Part {
	o := &partOptions{}
	return bench.Part{
		Name:  "endpointslice",
		Title: "EndpointSlice controller: fleetslice beside upstream, in process",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringSliceVar(&o.scenarios, "endpointslice-scenarios", nil,
				"endpointslice part: run only these scenarios (default: all)")
		},
		Run: o.run,
	}
}

func (o *partOptions) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	size := FullSize()
	if env.Quick {
		size = QuickSize()
	}
	var chosen []Scenario
	for _, sc := range Scenarios() {
		if len(o.scenarios) == 0 || slices.Contains(o.scenarios, sc.Name) {
			chosen = append(chosen, sc)
		}
	}
	if len(chosen) == 0 {
		return nil, fmt.Errorf("no scenario matches %v", o.scenarios)
	}
	results, err := RunAll(ctx, chosen, size, env)
	if err != nil {
		return nil, err
	}
	return buildReport(results, size, env)
}

// RunAll runs each scenario through upstream, then fleetslice, one after the other so neither
// pays for the other's garbage.
func RunAll(ctx context.Context, scenarios []Scenario, size Size, env bench.Env) ([]ScenarioResult, error) {
	var out []ScenarioResult
	for _, sc := range scenarios {
		res := ScenarioResult{Scenario: sc, Description: sc.Describe(size)}
		for _, side := range []string{Upstream, Fleetslice} {
			start := time.Now()
			r, err := RunScenario(ctx, sc, size, side)
			if err != nil {
				return nil, fmt.Errorf("scenario %s, %s: %w", sc.Name, side, err)
			}
			env.Logf("endpointslice %-16s %-10s %6d writes %4d syncs, %s of sync CPU (%s)", sc.Name, side,
				r.Writes.Total(), r.Syncs, r.CPU.Round(time.Millisecond), time.Since(start).Round(time.Second))
			if side == Upstream {
				res.Upstream = r
			} else {
				res.Fleetslice = r
			}
		}
		out = append(out, res)
	}
	return out, nil
}

func perEvent(v float64, events int) float64 {
	if events == 0 {
		return 0
	}
	return v / float64(events)
}

func cpuPerEvent(s SideResult) float64 {
	return perEvent(float64(s.CPU.Microseconds()), s.Events)
}

func buildReport(results []ScenarioResult, size Size, env bench.Env) (*bench.Report, error) {
	rep := &bench.Report{}
	scenarios := bench.Table{Caption: "Scenarios", Header: []string{"Scenario", "What happens"}}
	figures := bench.Table{
		Caption: "Figures per scenario and controller",
		Header: []string{"Scenario", "Controller", "Events", "Syncs", "Creates", "Updates", "Deletes",
			"Bytes written", fmt.Sprintf("Fan-out to %s watchers", bench.Count(Watchers)), "Peak slices",
			"Final slices (endpoints)", "CPU per event", "Allocs per event", "Allocated per event"},
	}
	ratios := bench.Table{
		Caption: "fleetslice / upstream (below 1× means fleetslice did less)",
		Header:  []string{"Scenario", "API writes", "Bytes written", "Fan-out", "Peak slices", "Final slices", "CPU per event", "Allocs per event"},
	}
	var totals [2]Writes
	var streamingNotes []string
	var cpu [2]time.Duration
	for _, r := range results {
		scenarios.Rows = append(scenarios.Rows, []string{r.Scenario.Name, r.Description})
		for i, s := range []SideResult{r.Upstream, r.Fleetslice} {
			figures.Rows = append(figures.Rows, []string{
				r.Scenario.Name, s.Controller, bench.Count(int64(s.Events)), bench.Count(int64(s.Syncs)),
				bench.Count(s.Writes.Creates), bench.Count(s.Writes.Updates), bench.Count(s.Writes.Deletes),
				bench.Bytes(float64(s.Writes.RequestBytes)), bench.Bytes(float64(s.Writes.WatchBytes) * Watchers),
				bench.Count(int64(s.PeakSlices)), fmt.Sprintf("%d (%s)", s.FinalSlices, bench.Count(int64(s.FinalEndpoints))),
				bench.Micros(cpuPerEvent(s)), fmt.Sprintf("%.0f", perEvent(float64(s.Allocs), s.Events)),
				bench.Bytes(perEvent(float64(s.AllocBytes), s.Events)),
			})
			totals[i].Creates += s.Writes.Creates
			totals[i].Updates += s.Writes.Updates
			totals[i].Deletes += s.Writes.Deletes
			totals[i].RequestBytes += s.Writes.RequestBytes
			totals[i].WatchBytes += s.Writes.WatchBytes
			cpu[i] += s.CPU
		}
		u, f := r.Upstream, r.Fleetslice
		ratios.Rows = append(ratios.Rows, []string{
			r.Scenario.Name,
			bench.Ratio(float64(f.Writes.Total()), float64(u.Writes.Total())),
			bench.Ratio(float64(f.Writes.RequestBytes), float64(u.Writes.RequestBytes)),
			bench.Ratio(float64(f.Writes.WatchBytes), float64(u.Writes.WatchBytes)),
			bench.Ratio(float64(f.PeakSlices), float64(u.PeakSlices)),
			bench.Ratio(float64(f.FinalSlices), float64(u.FinalSlices)),
			bench.Ratio(cpuPerEvent(f), cpuPerEvent(u)),
			bench.Ratio(perEvent(float64(f.Allocs), f.Events), perEvent(float64(u.Allocs), u.Events)),
		})
		rep.Checks = append(rep.Checks, sideChecks(r)...)
		if d := r.Fleetslice.Delays; len(d) > 0 {
			rep.Checks = append(rep.Checks, delayCheck(r.Scenario.Name, r.Fleetslice))
			ud := r.Upstream.Delays
			streamingNotes = append(streamingNotes, fmt.Sprintf("In %s each change waited for the end of the sync that took "+
				"it in (scenario time): fleetslice's p50 %s, p99 %s, at most %s; upstream's p50 %s, p99 %s, at most %s.",
				r.Scenario.Name, bench.Quantile(d, 0.5), bench.Quantile(d, 0.99), bench.Quantile(d, 1),
				bench.Quantile(ud, 0.5), bench.Quantile(ud, 0.99), bench.Quantile(ud, 1)))
		}
	}
	ratios.Rows = append(ratios.Rows, []string{
		"all scenarios",
		bench.Ratio(float64(totals[1].Total()), float64(totals[0].Total())),
		bench.Ratio(float64(totals[1].RequestBytes), float64(totals[0].RequestBytes)),
		bench.Ratio(float64(totals[1].WatchBytes), float64(totals[0].WatchBytes)),
		"", "", bench.Ratio(float64(cpu[1]), float64(cpu[0])) + " (total)", "",
	})
	rep.Checks = append(rep.Checks, headlineChecks(results)...)
	rep.Tables = []bench.Table{scenarios, figures, ratios}
	rep.Intro = fmt.Sprintf(`Both controllers get the same scripted changes to one Service, its Pods and %s Nodes in
three zones, and each reconciles the Service after every batch of changes (equal batching; in the
streaming scenario, as fast as the events come); each
writes to its own in-memory API store, and after every sync that store is exactly what the next
sync reads. Across all scenarios fleetslice made %s EndpointSlice writes to upstream's %s (%s),
its writes fanned out %s to %s watchers against upstream's %s (%s), and its syncs used %s of
upstream's CPU.`,
		bench.Count(int64(size.Nodes)), bench.Count(totals[1].Total()), bench.Count(totals[0].Total()),
		bench.Ratio(float64(totals[1].Total()), float64(totals[0].Total())),
		bench.Bytes(float64(totals[1].WatchBytes)*Watchers), bench.Count(Watchers), bench.Bytes(float64(totals[0].WatchBytes)*Watchers),
		bench.Ratio(float64(totals[1].WatchBytes), float64(totals[0].WatchBytes)),
		bench.Ratio(float64(cpu[1]), float64(cpu[0])))
	if err := addFigures(rep, results, env); err != nil {
		return nil, err
	}
	rep.Notes = methodNotes(size)
	if len(streamingNotes) > 0 {
		rep.Notes = append(rep.Notes, "In the streaming scenarios the syncs follow the events instead of equal batches: "+
			"upstream syncs after every change (or, loaded, as soon as its running sync ends), fleetslice when its "+
			"coalescing says. fleetslice's wait is the price of its fewer writes, bounded by --endpoint-updates-max-delay "+
			"beyond the sync it waits behind. "+strings.Join(streamingNotes, " "))
	}
	return rep, nil
}

// delayCheck holds coalescing to its promises: with syncs that take no time no change waits past
// the window (a quick control plane pays nothing for the adaptation); otherwise none waits past
// the max delay, plus the sync running when it came, which the workqueue makes it wait out, plus
// its own sync.
func delayCheck(scenario string, s SideResult) bench.Check {
	bound, what := endpointslice.DefaultCoalesceWindow, "the coalescing window, syncs taking no time"
	if s.LongestSync > 0 {
		bound = max(endpointslice.DefaultCoalesceBudget, s.LongestSync) + s.LongestSync
		what = fmt.Sprintf("the max delay %s, plus a running and its own sync of at most %s", endpointslice.DefaultCoalesceBudget, s.LongestSync)
	}
	c := bench.Check{Name: fmt.Sprintf("%s, fleetslice: no change waited more than %s (%s) for its sync", scenario, bound, what)}
	if worst := bench.Quantile(s.Delays, 1); worst > bound {
		c.Failure = fmt.Sprintf("a change waited %s", worst)
	}
	return c
}

func sideChecks(r ScenarioResult) []bench.Check {
	var out []bench.Check
	for _, s := range []SideResult{r.Upstream, r.Fleetslice} {
		var msgs []string
		for _, kind := range []string{"sync", "endpoints", "zones", "cap"} {
			if m, ok := s.Failures[kind]; ok {
				msgs = append(msgs, kind+": "+m)
			}
		}
		out = append(out, bench.Check{
			Name: fmt.Sprintf("%s, %s: every sync succeeded and left each endpoint listed exactly once, with its Pod's readiness and its Node's zone, in slices of at most %d",
				r.Scenario.Name, s.Controller, maxPerSlice),
			Failure: strings.Join(msgs, "; "),
		})
	}
	out = append(out, bench.Check{
		Name:    fmt.Sprintf("%s, fleetslice: at most ceil(endpoints/%d)+1 slices after every sync", r.Scenario.Name, maxPerSlice),
		Failure: r.Fleetslice.Failures["bound"],
	})
	return out
}

// headlineChecks are the claims the document makes of fleetslice against upstream: across all
// scenarios it writes no more, and no scenario ends with more slices. Single scenarios may cost a
// few writes more (compaction spends writes on fewer slices), so writes are compared in total.
func headlineChecks(results []ScenarioResult) []bench.Check {
	var up, ours int64
	var names []string
	for _, r := range results {
		up += r.Upstream.Writes.Total()
		ours += r.Fleetslice.Writes.Total()
		names = append(names, r.Scenario.Name)
	}
	writes := bench.Check{Name: fmt.Sprintf("fleetslice: at most upstream's API writes across %s", strings.Join(names, ", "))}
	if ours > up {
		writes.Failure = fmt.Sprintf("fleetslice made %d writes, upstream %d", ours, up)
	}
	out := []bench.Check{writes}
	for _, r := range results {
		c := bench.Check{Name: fmt.Sprintf("%s, fleetslice: at most upstream's final slices", r.Scenario.Name)}
		if f, u := r.Fleetslice.FinalSlices, r.Upstream.FinalSlices; f > u {
			c.Failure = fmt.Sprintf("fleetslice ends with %d slices, upstream %d", f, u)
		}
		out = append(out, c)
	}
	return out
}

func addFigures(rep *bench.Report, results []ScenarioResult, env bench.Env) error {
	for _, r := range results {
		if !r.Scenario.Plot {
			continue
		}
		sides := []SideResult{r.Upstream, r.Fleetslice}
		for _, fig := range []struct {
			suffix, title, y string
			value            func(Point) float64
		}{
			{"writes", "API writes over the " + r.Scenario.Name, "cumulative EndpointSlice writes", func(p Point) float64 { return float64(p.Writes) }},
			{"slices", "EndpointSlices during the " + r.Scenario.Name, "slices of the Service", func(p Point) float64 { return float64(p.Slices) }},
		} {
			path, link, ok := env.Figure(fmt.Sprintf("endpointslice-%s-%s.svg", r.Scenario.Name, fig.suffix))
			if !ok {
				continue
			}
			if err := WriteSeriesPlot(path, fig.title, fig.y, sides, fig.value); err != nil {
				return fmt.Errorf("drawing %s: %w", path, err)
			}
			rep.Figures = append(rep.Figures, bench.Figure{Path: path, Link: link,
				Caption: fmt.Sprintf("%s: %s, upstream and fleetslice", r.Scenario.Name, fig.y)})
		}
	}
	return nil
}

func methodNotes(size Size) []string {
	return []string{
		fmt.Sprintf(`How upstream is driven: k8s.io/endpointslice's Reconciler with kube-controller-manager's
arguments (100 endpoints per slice, its EndpointSliceTracker, a TopologyCache fed every Node
change through SetNodes, the TriggerTimeTracker, a Node lister), given the Pods and its slices
from the store as kube-controller-manager's listers would, after the same stale-cache check;
slice deletions reach its tracker after the sync, as informer events would. Its client is a
client-go fake clientset whose EndpointSlice requests the store answers. fleetslice's
Reconcile runs with its defaults (100 per slice, compaction slack 1) through a client that
reads the store as the manager's cache would. Batches: a sync per %d Pod changes in the
streaming scenarios, a sync per step in the others.`, size.Batch),
		`Bytes are protobuf sizes (the generated Size() of each EndpointSlice): "bytes written" counts
the objects sent in creates and updates, "fan-out" counts every watch event's object (created,
updated, and the last state of a deleted slice) times 5,000 watchers, one kube-proxy per node.`,
		`CPU is the process's user and system time (getrusage) inside the Service syncs only, garbage
collection included and event handlers excluded on both sides; it includes the store's copy of
every written object, standing in for the client's encoding, for both controllers alike.
Allocations come from runtime.MemStats around each sync. The machine is shared, so CPU figures
carry noise of some percent. Write and byte counts are exact; fleetslice's are reproducible
(fixed seeds), upstream's vary by a percent or so between runs, because its reconciler takes
endpoints and slice names out of sets in map order.`,
	}
}
