package sim

import (
	"context"
	"math"
	"testing"
)

func TestShareGroupsCoverEverySectionOnceWithEqualRatios(t *testing.T) {
	secs := sections()
	for _, share := range []bool{false, true} {
		groups := byCostFirst(secs, shareGroups(secs, share))
		want := len(secs)
		if share {
			want = 172 + 1 // distinct reduced Node triples of 1..10, and the 30-Node section
		}
		if len(groups) != want {
			t.Fatalf("share=%v: %d groups, want %d", share, len(groups), want)
		}
		seen := map[int]bool{}
		for _, g := range groups {
			first := secs[g[0]]
			for _, i := range g {
				if seen[i] {
					t.Fatalf("section %d in two groups", i)
				}
				seen[i] = true
				s := secs[i]
				if reduceRatio(s.nodes) != reduceRatio(first.nodes) || s.lo != first.lo || s.hi != first.hi || s.step != first.step {
					t.Fatalf("sections %v and %v share a group", first, s)
				}
			}
		}
		if len(seen) != len(secs) {
			t.Fatalf("share=%v: %d of %d sections grouped", share, len(seen), len(secs))
		}
		if last := secs[groups[0][0]]; last.nodes != [Zones]int{30, 30, 30} {
			t.Fatalf("the costliest section must go first, got %v", last.nodes)
		}
	}
}

// countingAlgorithm hints every case with one endpoint per zone pair and counts its calls.
type countingAlgorithm struct{ calls int }

func (a *countingAlgorithm) Plan(c Case, plan *Plan) bool {
	a.calls++
	*plan = Plan{}
	plan[0] = c.Endpoints[0]
	return c.Endpoints[0]%2 == 0
}

func TestPlanMemoPlansEachCaseOnceAndKeepsUnhinted(t *testing.T) {
	alg := &countingAlgorithm{}
	m := (&planMemo{}).reset(true, 4)
	var scratch Plan
	for range 3 {
		for j := range 4 {
			c := Case{Endpoints: [Zones]int{j, 0, 0}}
			plan, hinted := m.plan(alg, j, c, &scratch)
			if hinted != (j%2 == 0) || plan[0] != j {
				t.Fatalf("case %d: plan %v hinted %v", j, plan, hinted)
			}
		}
	}
	if alg.calls != 4 {
		t.Fatalf("%d plans for 4 cases seen 3 times each, want 4", alg.calls)
	}
	m.reset(true, 4)
	m.plan(alg, 0, Case{}, &scratch)
	if alg.calls != 5 {
		t.Fatal("reset must forget the previous group's plans")
	}
	m.reset(false, 4)
	m.plan(alg, 0, Case{}, &scratch)
	m.plan(alg, 0, Case{}, &scratch)
	if alg.calls != 7 {
		t.Fatal("an off memo must plan every time")
	}
}

// ratioAlgorithm is deterministic and proportional: its plan depends on the endpoints and the
// reduced Node ratios only.
type ratioAlgorithm struct{ calls int }

func (a *ratioAlgorithm) Plan(c Case, plan *Plan) bool {
	a.calls++
	r := reduceRatio(c.Nodes)
	*plan = Plan{}
	for z := range Zones {
		plan[z*Zones+(z+r[z])%Zones] = c.Endpoints[z]
	}
	return (r[0]+c.Endpoints[0])%3 != 0
}

// Sharing plans must score exactly like planning every case, and plan fewer cases.
func TestSharedPlansScoreLikeUnshared(t *testing.T) {
	cfg := Config{Sample: 200_000, Workers: 2}
	var algs []*ratioAlgorithm
	newAlgorithm := func() Algorithm {
		a := &ratioAlgorithm{}
		algs = append(algs, a)
		return a
	}
	calls := func() (n int) {
		for _, a := range algs {
			n += a.calls
		}
		algs = nil
		return n
	}
	shared, err := runShared(context.Background(), cfg, newAlgorithm, true)
	if err != nil {
		t.Fatal(err)
	}
	sharedCalls := calls()
	alone, err := runShared(context.Background(), cfg, newAlgorithm, false)
	if err != nil {
		t.Fatal(err)
	}
	aloneCalls := calls()
	shared.Elapsed, alone.Elapsed = 0, 0
	if shared != alone {
		t.Fatalf("shared plans scored\n%+v\nunshared\n%+v", shared, alone)
	}
	// A sparse sample rarely meets the same endpoints in two sections of a group; the whole
	// space plans about a fifth fewer cases.
	if aloneCalls != 200_000 || sharedCalls >= aloneCalls {
		t.Fatalf("planned %d cases shared, %d unshared: want 200,000 unshared and fewer shared", sharedCalls, aloneCalls)
	}
}

// Upstream hints depend on map order in ties, so two runs differ in the last digits; sharing
// must agree with planning alone on counts and, to a hundredth of a point, on means.
func TestSharedUpstreamPlansScoreLikeUnshared(t *testing.T) {
	fleetslice, err := NewAlgorithm(Settings{Algorithm: Fleetslice, Threshold: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if !isProportional(newUpstream()) || isProportional(fleetslice) || isProportional(original{}) {
		t.Fatal("only upstream is declared proportional")
	}
	newUpstreamAlgorithm := func() Algorithm { return newUpstream() }
	cfg := Config{Settings: Settings{Algorithm: Upstream}, Sample: 20_000}
	shared, err := runShared(context.Background(), cfg, newUpstreamAlgorithm, true)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := runShared(context.Background(), cfg, newUpstreamAlgorithm, false)
	if err != nil {
		t.Fatal(err)
	}
	if shared.Valid != alone.Valid || shared.Hinted != alone.Hinted {
		t.Fatalf("valid/hinted %d/%d shared, %d/%d unshared", shared.Valid, shared.Hinted, alone.Valid, alone.Hinted)
	}
	for _, m := range []struct {
		name      string
		got, want float64
	}{
		{"total", shared.Mean(shared.Total), alone.Mean(alone.Total)},
		{"in-zone", shared.Mean(shared.InZone), alone.Mean(alone.InZone)},
		{"deviation", shared.Mean(shared.Deviation), alone.Mean(alone.Deviation)},
	} {
		if math.Abs(m.got-m.want) > 0.01 {
			t.Errorf("mean %s %.4f shared, %.4f unshared", m.name, m.got, m.want)
		}
	}
}
