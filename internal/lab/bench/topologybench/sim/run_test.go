package sim

import (
	"context"
	"math"
	"testing"
)

func run(t *testing.T, s Settings, sample int) Stats {
	t.Helper()
	st, err := Run(context.Background(), Config{Settings: s, Sample: sample, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Valid+st.Invalid != sample {
		t.Fatalf("%d cases scored, want %d", st.Valid+st.Invalid, sample)
	}
	return st
}

// The published original row: mean total 72.48, max 92.50, min 70.00, in-zone mean 38.84,
// max 83.33, min 33.33. An even sample lands close to the mean and inside the extremes.
func TestOriginalOnSample(t *testing.T) {
	st := run(t, Settings{Algorithm: Original}, 200_000)
	if st.Invalid != 0 || st.Hinted != 0 {
		t.Fatalf("original: %d invalid, %d hinted", st.Invalid, st.Hinted)
	}
	if m := st.Mean(st.InZone); math.Abs(m-38.84) > 0.5 {
		t.Fatalf("mean in-zone %.2f far from the published 38.84", m)
	}
	if st.Total.Max > 92.5+1e-9 || st.Total.Min < 70-1e-9 || st.Deviation.Min != 100 || st.Slice.Min != 100 {
		t.Fatalf("original outside the published extremes: %v", st.Record())
	}
}

// The whole space, to the published two decimals; takes a few CPU seconds.
func TestOriginalFullSpaceMatchesPublished(t *testing.T) {
	if testing.Short() {
		t.Skip("full space")
	}
	st := run(t, Settings{Algorithm: Original}, CaseCount())
	rec := st.Record()
	want := []string{"original", "0", "39273145", "72.48", "92.50", "70.00", "38.84", "83.33", "33.33"}
	for i := range want {
		if rec[i] != want[i] {
			t.Fatalf("column %q = %s, published %s", CSVHeader[i], rec[i], want[i])
		}
	}
}

func TestFleetsliceRespectsThresholdOnSample(t *testing.T) {
	for _, th := range []float64{0.1, 0.25} {
		st := run(t, Settings{Algorithm: Fleetslice, Threshold: th}, 50_000)
		if st.Invalid != 0 || st.Hinted == 0 {
			t.Fatalf("threshold %.2f: %d invalid, %d hinted", th, st.Invalid, st.Hinted)
		}
		if st.MaxOverloadPct.Max > 100*th+1e-6 || st.OverThreshold != 0 {
			t.Fatalf("threshold %.2f: an endpoint expects %.4f%% over fair share", th, st.MaxOverloadPct.Max)
		}
	}
}

// Upstream through the library gives up on 4-4-3 in equal zones (kubernetes/kubernetes 122437)
// where fleetslice at 25% keeps all traffic in zone.
func TestUpstreamAndFleetsliceOn443(t *testing.T) {
	c := Case{Nodes: [3]int{2, 2, 2}, Endpoints: [3]int{3, 4, 4}}
	up, _ := NewAlgorithm(Settings{Algorithm: Upstream})
	var plan Plan
	if up.Plan(c, &plan) {
		t.Fatalf("upstream hinted 4-4-3: %v", plan)
	}
	ours, _ := NewAlgorithm(Settings{Algorithm: Fleetslice, Threshold: 0.25})
	if !ours.Plan(c, &plan) {
		t.Fatal("fleetslice gave up on 4-4-3")
	}
	if o := Evaluate(c, &plan); !near(o.InZone, 1) || o.MaxOverload > 0.25 {
		t.Fatalf("fleetslice 4-4-3: %+v", o)
	}
	// Upstream checks that its per-zone minimums fit but then rounds towards the proportional
	// target and stops below half an endpoint, leaving zone a with 2 endpoints for 3/17 of the
	// traffic of 16: 41% over fair share, above its own 20%. fleetslice at 20% stays within.
	c = Case{Nodes: [3]int{3, 6, 8}, Endpoints: [3]int{2, 6, 8}}
	if !up.Plan(c, &plan) || math.Abs(Evaluate(c, &plan).MaxOverload-(3.0/17/2*16-1)) > 1e-9 {
		t.Fatalf("upstream on %v: %v %+v", c, plan, Evaluate(c, &plan))
	}
	ours20, _ := NewAlgorithm(Settings{Algorithm: Fleetslice, Threshold: 0.2})
	if !ours20.Plan(c, &plan) || Evaluate(c, &plan).MaxOverload > 0.2 {
		t.Fatalf("fleetslice at 20%% on %v: %v", c, plan)
	}
	// A case upstream does hint: its plan must account for every endpoint.
	c = Case{Nodes: [3]int{1, 2, 3}, Endpoints: [3]int{10, 20, 60}}
	if !up.Plan(c, &plan) || Evaluate(c, &plan).Invalid {
		t.Fatalf("upstream on %v: %v", c, plan)
	}
}

func TestUpstreamOnSample(t *testing.T) {
	st := run(t, Settings{Algorithm: Upstream}, 5_000)
	if st.Invalid != 0 || st.Hinted < st.Valid/2 || st.Threshold != UpstreamThreshold {
		t.Fatalf("upstream: %v", st.Record())
	}
}

func TestDynamicReplaysBothAlgorithms(t *testing.T) {
	cfg := DynamicConfig{Threshold: 0.25, Cases: 60, Steps: 30, Seed: 7, Workers: 2}
	a, err := RunDynamic(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunDynamic(context.Background(), cfg)
	for i := range a {
		if a[i].Events != 60*30 || a[i].Cases != 60 {
			t.Fatalf("%s: %d events in %d cases", a[i].Algorithm, a[i].Events, a[i].Cases)
		}
	}
	// Upstream breaks ties between zones by Go map order, so only fleetslice must repeat itself.
	a[0].Elapsed, b[0].Elapsed = 0, 0
	if a[0] != b[0] {
		t.Fatalf("same seed, different result:\n%+v\n%+v", a[0], b[0])
	}
	if a[1].Events != b[1].Events || a[1].HintedSteps == 0 {
		t.Fatalf("upstream replay: %+v", a[1])
	}
	// Without memory every event re-plans from scratch: never fewer changes than with it.
	if a[2].Algorithm != FleetsliceStateless || a[2].OverSteps != 0 || a[2].HintChanges < a[0].HintChanges {
		t.Fatalf("stateless %+v vs lazy %+v", a[2], a[0])
	}
	if a[0].Algorithm != Fleetslice || a[0].OverSteps != 0 || a[0].MaxOverload > 0.25+1e-9 {
		t.Fatalf("fleetslice broke its bound in dynamic mode: %+v", a[0])
	}
}
