package agentbench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func samples(own float64, outside time.Duration, n int) []versusSample {
	out := make([]versusSample, n)
	for i := range out {
		out[i] = versusSample{own: own, outside: outside, syncs: 1, partial: 1, programming: math.NaN()}
	}
	return out
}

func TestVersusTables(t *testing.T) {
	res := []versusResult{{
		size: versusSize{services: 1000, endpoints: 10},
		programs: []programResult{
			{name: "agent", lines: 900, counts: tableCounts{Chains: 10, Rules: 20, Sets: 3, Elements: 1000}, rss: 64 << 20, load: "1.00, 2.00, 3.00",
				steps: []versusStep{
					{name: versusCold, samples: []versusSample{{own: 0.5, outside: time.Second, syncs: 1, full: 1, programming: math.NaN()}}},
					{name: versusAdd, samples: samples(0.010, 20*time.Millisecond, 3)},
				}},
			{name: "kube-proxy", lines: 1800, counts: tableCounts{Chains: 30, Rules: 40}, load: "1.00, 2.00, 3.00",
				steps: []versusStep{
					{name: versusCold, samples: []versusSample{{own: 2, outside: 4 * time.Second, syncs: 1, full: 1, programming: math.NaN()}}},
					{name: versusAdd, samples: samples(0.100, 200*time.Millisecond, 3)},
					{name: versusEndpoint, samples: samples(0.100, 200*time.Millisecond, 3)},
				}},
		},
	}}
	tabs := versusTables(res)
	if len(tabs) != 2 {
		t.Fatalf("%d tables, want the syncs and the tables", len(tabs))
	}
	syncs, tables := tabs[0], tabs[1]
	if len(syncs.Rows) != 3 {
		t.Fatalf("sync rows %v, want cold, added and endpoint (the agent lacks the last)", syncs.Rows)
	}
	for _, tab := range tabs {
		for _, row := range tab.Rows {
			if len(row) != len(tab.Header) {
				t.Errorf("row %v has %d cells for %d columns", row, len(row), len(tab.Header))
			}
		}
	}
	cold := strings.Join(syncs.Rows[0], " | ")
	for _, want := range []string{"1,000 | 10 | " + versusCold, "| 2.00 s | 500", "| 0.25× |", "| 4.00 s | 1.00 s | 0.25× |", "| 1/0; 1/0"} {
		if !strings.Contains(cold, want) {
			t.Errorf("cold row %q lacks %q", cold, want)
		}
	}
	if added := strings.Join(syncs.Rows[1], " | "); !strings.Contains(added, "| 3, 3 |") || !strings.Contains(added, "| 0.10× |") {
		t.Errorf("added row %q: want 3 runs each and a 0.10× ratio", added)
	}
	// The agent has no endpoint figure: n/a, never 0 or NaN.
	endpoint := syncs.Rows[2]
	if endpoint[5] != "n/a" || endpoint[6] != "n/a" || strings.Contains(strings.Join(endpoint, " "), "NaN") {
		t.Errorf("endpoint row %v: want n/a for the agent's missing figures", endpoint)
	}
	if len(tables.Rows) != 2 || tables.Rows[0][2] != "agent" || tables.Rows[0][3] != "900" || tables.Rows[0][8] != "64 MiB" ||
		tables.Rows[1][8] != "n/a" {
		t.Errorf("table rows %v", tables.Rows)
	}
}

func TestRatioAndMedian(t *testing.T) {
	if got := ratio(1, 4); got != "0.25×" {
		t.Errorf("ratio = %q", got)
	}
	for _, c := range [][2]float64{{math.NaN(), 1}, {1, math.NaN()}, {1, 0}} {
		if got := ratio(c[0], c[1]); got != "n/a" {
			t.Errorf("ratio(%v) = %q, want n/a", c, got)
		}
	}
	if got := medianFloat([]float64{3, math.NaN(), 1, 2}); got != 2 {
		t.Errorf("median = %v, want 2 (NaN left out)", got)
	}
	if got := medianFloat([]float64{4, 1}); got != 1 {
		t.Errorf("median of two = %v, want the lower", got)
	}
	if got := medianFloat([]float64{math.NaN()}); !math.IsNaN(got) {
		t.Errorf("median of none = %v, want NaN", got)
	}
}

func TestVersusIntroSaysWhyItWasSkipped(t *testing.T) {
	if got := versusIntro(nil, 0, 0, "it needs the kube-proxy binary"); !strings.Contains(got, "not run side by side") ||
		!strings.Contains(got, "kube-proxy binary") {
		t.Errorf("intro = %q", got)
	}
	got := versusIntro([]versusSize{{services: 1000, endpoints: 10}, {services: 5000, endpoints: 50}}, 5, 3, "")
	for _, want := range []string{"1,000 × 10, 5,000 × 50", "over\n3 starts", "5 runs each", "v1.37.2"} {
		if !strings.Contains(got, want) {
			t.Errorf("intro lacks %q:\n%s", want, got)
		}
	}
}

func TestVersusMemoryChecksHoldLargeSizesOnly(t *testing.T) {
	at := func(services, endpoints int, agent, kubeProxy int64, agentOnly bool) versusResult {
		r := versusResult{size: versusSize{services: services, endpoints: endpoints, agentOnly: agentOnly},
			programs: []programResult{{name: "agent", rss: agent << 20}}}
		if !agentOnly {
			r.programs = append(r.programs, programResult{name: "kube-proxy", rss: kubeProxy << 20})
		}
		return r
	}
	checks := versusMemoryChecks([]versusResult{
		at(1000, 10, 90, 92, false),    // small: not held
		at(5000, 50, 200, 424, false),  // holds
		at(10000, 50, 300, 424, false), // fails
		at(50000, 10, 1500, 0, true),   // the agent alone: nothing to compare
	})
	if len(checks) != 2 || checks[0].Failure != "" || checks[1].Failure != "300 MiB against 424 MiB (0.71×)" {
		t.Fatalf("checks = %+v", checks)
	}
	if !strings.Contains(checks[0].Name, "5,000 × 50") {
		t.Fatalf("check name %q does not name the size", checks[0].Name)
	}

	// A periodic full resync above the cold sync's peak is the agent's peak.
	resynced := at(5000, 50, 200, 424, false)
	resynced.programs[0].steps = []versusStep{{name: versusResync, samples: []versusSample{{rss: 150 << 20}, {rss: 280 << 20}}}}
	resynced.programs[1].steps = []versusStep{{name: versusRestart, samples: []versusSample{{rss: 436 << 20}}}}
	if c := versusMemoryChecks([]versusResult{resynced}); len(c) != 1 || c[0].Failure != "280 MiB against 436 MiB (0.64×)" {
		t.Fatalf("checks with a resync above the cold peak = %+v", c)
	}
}
