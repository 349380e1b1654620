package slicediff

import (
	"context"
	"strings"
	"testing"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

// tinySize keeps the shape of the scenarios at a size plain `go test` runs in seconds.
func tinySize() Size {
	return Size{Endpoints: 250, Nodes: 30, Batch: 10, FlapSteps: 5, ZoneSteps: 4}
}

func TestScenariosKeepEveryEndpointOnBothSides(t *testing.T) {
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			sz := tinySize()
			if strings.Contains(sc.Name, "streaming") {
				sz = streamingSize(sz)
			}
			ideal := (sz.Endpoints + maxPerSlice - 1) / maxPerSlice
			var sides []SideResult
			for _, name := range []string{Upstream, Fleetslice} {
				res, err := RunScenario(context.Background(), sc, tinySize(), name)
				if err != nil {
					t.Fatal(err)
				}
				for kind, msg := range res.Failures {
					t.Errorf("%s %s: %s", name, kind, msg)
				}
				if res.FinalEndpoints != sz.Endpoints {
					t.Errorf("%s ends with %d endpoints, want %d", name, res.FinalEndpoints, sz.Endpoints)
				}
				if res.Syncs == 0 || res.Events == 0 || (sc.Plot && len(res.Series) != res.Syncs) {
					t.Errorf("%s: %d syncs, %d events, %d points", name, res.Syncs, res.Events, len(res.Series))
				}
				sides = append(sides, res)
			}
			up, ours := sides[0], sides[1]
			streaming := len(ours.Delays) > 0
			if up.Events != ours.Events || (!streaming && up.Syncs != ours.Syncs) {
				t.Errorf("unequal streams: upstream %d events in %d syncs, fleetslice %d in %d", up.Events, up.Syncs, ours.Events, ours.Syncs)
			}
			if ours.FinalSlices > ideal+1 || ours.MaxExcessSlices > 1 {
				t.Errorf("fleetslice: %d final slices, %d excess at worst, for %d endpoints", ours.FinalSlices, ours.MaxExcessSlices, sz.Endpoints)
			}
			if sc.Name == "create" {
				for _, s := range sides {
					if s.Writes.Creates != int64(ideal) || s.Writes.Updates+s.Writes.Deletes != 0 {
						t.Errorf("%s created the Service's slices with %+v, want %d creates", s.Controller, s.Writes, ideal)
					}
				}
			} else if up.Writes.Total() == 0 || ours.Writes.Total() == 0 {
				t.Errorf("a side wrote nothing: upstream %+v, fleetslice %+v", up.Writes, ours.Writes)
			}
		})
	}
}

// TestStreamingCoalescesWithinTheBudget holds the streaming scenario to what coalescing promises:
// fewer syncs and writes than upstream's sync per change, and no change waiting past the budget.
func TestStreamingCoalescesWithinTheBudget(t *testing.T) {
	// 200 Pods: enough changes a second for bursts to form, as in a real rollout.
	up, ours := runBothSides(t, "rolling-update-streaming", 2000)
	if up.Syncs != up.Events {
		t.Errorf("upstream synced %d times for %d changes, want one sync per change", up.Syncs, up.Events)
	}
	if ours.Syncs >= up.Syncs/2 || float64(ours.Writes.Total()) > 0.8*float64(up.Writes.Total()) {
		t.Errorf("fleetslice %d syncs and %d writes against upstream's %d and %d", ours.Syncs, ours.Writes.Total(), up.Syncs, up.Writes.Total())
	}
	if len(ours.Delays) != ours.Events {
		t.Fatalf("%d delays for %d changes", len(ours.Delays), ours.Events)
	}
	// Syncs take no time here: the window never stretches, so a quick control plane pays no
	// more than the window.
	for _, d := range ours.Delays {
		if d < 0 || d > endpointslice.DefaultCoalesceWindow {
			t.Fatalf("a change waited %s, outside 0..%s", d, endpointslice.DefaultCoalesceWindow)
		}
	}
}

// TestLoadedStreamingAdaptsTheWindow holds the loaded streaming scenario, where syncs take time and
// upstream's slowness batches its changes, to what the adaptive window is for: fewer writes than
// upstream there, fewer than the same window without the stretch, and no change waiting past the
// cap beyond the syncs it waits behind.
func TestLoadedStreamingAdaptsTheWindow(t *testing.T) {
	up, ours := runBothSides(t, "rolling-update-streaming-loaded", 5000) // 500 Pods, five slices: syncs slow enough to stretch the window
	defaults := coalescing
	t.Cleanup(func() { coalescing = defaults })
	coalescing.MaxDelay = coalescing.Window // the window, never stretched
	fixed := runSide(t, "rolling-update-streaming-loaded", 5000, Fleetslice)
	t.Logf("writes: upstream %d, fleetslice %d, without the stretch %d", up.Writes.Total(), ours.Writes.Total(), fixed.Writes.Total())
	if w := float64(ours.Writes.Total()); w > 0.8*float64(up.Writes.Total()) || w > 0.8*float64(fixed.Writes.Total()) {
		t.Errorf("fleetslice wrote %d, upstream %d, fleetslice without the stretch %d", ours.Writes.Total(), up.Writes.Total(), fixed.Writes.Total())
	}
	if up.Syncs >= up.Events || up.LongestSync == 0 {
		t.Errorf("upstream synced %d times for %d changes, longest sync %s: its syncs should take time and batch", up.Syncs, up.Events, up.LongestSync)
	}
	bound := max(defaults.MaxDelay, ours.LongestSync) + ours.LongestSync
	for _, d := range ours.Delays {
		if d < 0 || d > bound {
			t.Fatalf("a change waited %s, outside 0..%s", d, bound)
		}
	}
}

func TestScenarioReplaysIdentically(t *testing.T) {
	sc := Scenarios()[1] // the rolling update: the most random one
	var runs []SideResult
	for range 2 {
		res, err := RunScenario(context.Background(), sc, tinySize(), Fleetslice)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, res)
	}
	if runs[0].Writes != runs[1].Writes || runs[0].Events != runs[1].Events {
		t.Errorf("two replays differ: %+v / %+v", runs[0].Writes, runs[1].Writes)
	}
}

func TestRunScenarioRejectsBadInput(t *testing.T) {
	if _, err := RunScenario(context.Background(), Scenarios()[0], Size{}, Fleetslice); err == nil {
		t.Error("an empty size was accepted")
	}
	if _, err := RunScenario(context.Background(), Scenarios()[0], tinySize(), "kube-proxy"); err == nil {
		t.Error("an unknown controller was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunScenario(ctx, Scenarios()[1], tinySize(), Upstream); err == nil {
		t.Error("a cancelled run returned figures")
	}
}

// TestFleetsliceWritesNoMoreThanUpstream asserts the headline on the fixed seeds at the size of
// `fleetslice bench --quick`: across all scenarios fleetslice writes no more than upstream, and no
// scenario ends with more slices. The bench checks the same at whichever size it runs.
//
// Not at tinySize: there the two are within a few writes of each other, and upstream's count
// varies by about as much from run to run (its reconciler takes endpoints and slices out of sets
// in map order), so the comparison would flap. At the quick size fleetslice writes about 2% less
// than the best of upstream's runs seen (5,133 against 5,251 to 5,343).
func TestFleetsliceWritesNoMoreThanUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs both controllers through every scenario at the quick bench size")
	}
	// Each controller and scenario runs in a parallel subtest of its own: the figures compared
	// are write and slice counts, which do not depend on what else runs.
	scenarios := Scenarios()
	results := make([]ScenarioResult, len(scenarios))
	t.Run("run", func(t *testing.T) {
		for i, sc := range scenarios {
			results[i].Scenario = sc
			for _, side := range []string{Upstream, Fleetslice} {
				t.Run(sc.Name+"/"+side, func(t *testing.T) {
					t.Parallel()
					res, err := RunScenario(context.Background(), sc, QuickSize(), side)
					if err != nil {
						t.Fatal(err)
					}
					if side == Upstream {
						results[i].Upstream = res
					} else {
						results[i].Fleetslice = res
					}
				})
			}
		}
	})
	if t.Failed() {
		return
	}
	var up, ours int64
	for _, r := range results {
		up += r.Upstream.Writes.Total()
		ours += r.Fleetslice.Writes.Total()
		t.Logf("%-16s writes: upstream %4d, fleetslice %4d; final slices: upstream %d, fleetslice %d", r.Scenario.Name,
			r.Upstream.Writes.Total(), r.Fleetslice.Writes.Total(), r.Upstream.FinalSlices, r.Fleetslice.FinalSlices)
	}
	t.Logf("all scenarios: upstream %d writes, fleetslice %d", up, ours)
	for _, c := range headlineChecks(results) {
		if !c.Passed() {
			t.Errorf("%s: %s", c.Name, c.Failure)
		}
	}
}

func TestHeadlineChecksFailWhenFleetsliceDoesWorse(t *testing.T) {
	side := func(name string, updates int64, final int) SideResult {
		return SideResult{Controller: name, Writes: Writes{Updates: updates}, FinalSlices: final}
	}
	result := func(name string, up, ours SideResult) ScenarioResult {
		return ScenarioResult{Scenario: Scenario{Name: name}, Upstream: up, Fleetslice: ours}
	}
	failures := func(rs ...ScenarioResult) int {
		n := 0
		for _, c := range headlineChecks(rs) {
			if !c.Passed() {
				n++
			}
		}
		return n
	}
	// One scenario a write worse, the other two better: the total holds.
	if n := failures(result("a", side(Upstream, 10, 3), side(Fleetslice, 11, 3)), result("b", side(Upstream, 10, 3), side(Fleetslice, 8, 2))); n != 0 {
		t.Errorf("%d checks failed where fleetslice wrote less in total and ended with no more slices", n)
	}
	if n := failures(result("a", side(Upstream, 10, 3), side(Fleetslice, 11, 3))); n != 1 {
		t.Errorf("%d checks failed for one write more in total, want 1", n)
	}
	if n := failures(result("a", side(Upstream, 10, 3), side(Fleetslice, 9, 4))); n != 1 {
		t.Errorf("%d checks failed for one final slice more, want 1", n)
	}
}

func scenarioNamed(t *testing.T, name string) Scenario {
	t.Helper()
	for _, s := range Scenarios() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}
}

// TestLoadedCreationWritesLessThanUpstream holds creation under a stream of clumped Pod events to
// what churn coalescing is for: fewer writes than upstream, whose slow syncs batch for it, and no
// change waiting past the cap beyond the syncs it waits behind. Closing a window on every quiet
// spell, as coalescing did before it knew churn, wrote more than upstream here.
func TestLoadedCreationWritesLessThanUpstream(t *testing.T) {
	up, ours := runBothSides(t, "create-streaming-loaded", 5000) // 500 Pods
	t.Logf("upstream %d syncs, %d writes; fleetslice %d syncs, %d writes", up.Syncs, up.Writes.Total(), ours.Syncs, ours.Writes.Total())
	if w := float64(ours.Writes.Total()); w > 0.8*float64(up.Writes.Total()) {
		t.Errorf("fleetslice wrote %d creating the Pods, more than 0.8x upstream's %d", ours.Writes.Total(), up.Writes.Total())
	}
	bound := max(coalescing.MaxDelay, ours.LongestSync) + ours.LongestSync
	for _, d := range ours.Delays {
		if d < 0 || d > bound {
			t.Fatalf("a change waited %s, outside 0..%s", d, bound)
		}
	}
}

// runBothSides runs the scenario named name at endpoints endpoints through upstream's model and
// fleetslice's.
func runBothSides(t *testing.T, name string, endpoints int) (up, ours SideResult) {
	t.Helper()
	return runSide(t, name, endpoints, Upstream), runSide(t, name, endpoints, Fleetslice)
}

// runSide runs the scenario named name at endpoints endpoints through one controller.
func runSide(t *testing.T, name string, endpoints int, side string) SideResult {
	t.Helper()
	sz := tinySize()
	sz.Endpoints = endpoints
	res, err := RunScenario(context.Background(), scenarioNamed(t, name), sz, side)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
