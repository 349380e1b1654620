package topology

import (
	"fmt"
	"testing"
)

var zoneNames = []string{"a", "b", "c", "d", "e", "f"}

// zonesCPU builds zones a, b, c... with the given milli-CPU.
func zonesCPU(cpu ...int64) []Zone {
	zones := make([]Zone, len(cpu))
	for i, c := range cpu {
		zones[i] = Zone{Name: zoneNames[i], MilliCPU: c}
	}
	return zones
}

// spread builds unhinted endpoints: counts[i] endpoints in zone i.
func spread(counts ...int) []Endpoint {
	var eps []Endpoint
	for z, n := range counts {
		for i := range n {
			eps = append(eps, Endpoint{Key: fmt.Sprintf("%s-%d", zoneNames[z], i), Zone: zoneNames[z]})
		}
	}
	return eps
}

// ownHints gives every endpoint a hint for its own zone.
func ownHints(eps []Endpoint) []Endpoint {
	out := append([]Endpoint(nil), eps...)
	for i := range out {
		out[i].Hint = out[i].Zone
	}
	return out
}

// withHints feeds a result back as the current hints.
func withHints(eps []Endpoint, hints []string) []Endpoint {
	out := append([]Endpoint(nil), eps...)
	for i := range out {
		out[i].Hint = hints[i]
	}
	return out
}

// hintCounts counts endpoints per hinted zone.
func hintCounts(hints []string) map[string]int {
	m := map[string]int{}
	for _, h := range hints {
		m[h]++
	}
	return m
}

func opts(threshold float64, before bool) Options {
	o := DefaultOptions()
	o.OverloadThreshold = threshold
	o.EnabledBefore = before
	return o
}

func TestAllocate(t *testing.T) {
	equal := zonesCPU(4000, 4000, 4000)
	tests := []struct {
		name      string
		zones     []Zone
		endpoints []Endpoint
		opts      Options
		reason    Reason         // expected reason when hints are off
		perZone   map[string]int // expected endpoints per hinted zone, when on
		inZone    float64        // expected in-zone share when on (0: not checked)
		moved     int
	}{
		{
			name: "4-4-3 spread keeps every endpoint in its zone (22% over, under 25%)", zones: equal,
			endpoints: spread(4, 4, 3), opts: opts(0.25, false),
			perZone: map[string]int{"a": 4, "b": 4, "c": 3}, inZone: 1,
		},
		{
			name: "11 endpoints in 3 equal zones all in one zone still get hints", zones: equal,
			endpoints: spread(11, 0, 0), opts: opts(0.25, false),
			perZone: map[string]int{"a": 5, "b": 3, "c": 3}, inZone: 1.0 / 3,
		},
		{
			name: "11 endpoints in 3 equal zones cannot meet 20%", zones: equal,
			endpoints: spread(4, 4, 3), opts: opts(0.2, false), reason: MinAllocationExceedsOverloadThreshold,
		},
		{
			name: "2-2-2 during a rolling restart stays on", zones: equal,
			endpoints: ownHints(spread(2, 2, 2)), opts: opts(0.25, true),
			perZone: map[string]int{"a": 2, "b": 2, "c": 2}, inZone: 1,
		},
		{
			name: "2-2-2 plus a surge Pod keeps all hints and hints the new one at home", zones: equal,
			endpoints: append(ownHints(spread(2, 2, 2)), Endpoint{Key: "a-new", Zone: "a"}), opts: opts(0.25, true),
			perZone: map[string]int{"a": 3, "b": 2, "c": 2}, inZone: 1,
		},
		{
			name: "2-2-2 without hints before is below the switch-on point", zones: equal,
			endpoints: spread(2, 2, 2), opts: opts(0.25, false), reason: InsufficientNumberOfEndpoints,
		},
		{
			name: "2-2-1 is below the switch-off point", zones: equal,
			endpoints: ownHints(spread(2, 2, 1)), opts: opts(0.25, true), reason: InsufficientNumberOfEndpoints,
		},
		{
			name: "empty zone gets whole endpoints from the others", zones: equal,
			endpoints: spread(5, 5, 0), opts: opts(0.25, false),
			perZone: map[string]int{"a": 3, "b": 4, "c": 3}, inZone: 2.0 / 3,
		},
		{
			name: "1-10-100 lopsided donates only what the bound needs", zones: equal,
			endpoints: spread(1, 10, 100), opts: opts(0.25, false),
			perZone: map[string]int{"a": 30, "b": 30, "c": 51}, inZone: (1.0/30 + 10.0/30 + 1) / 3,
		},
		{
			name: "unequal CPU: the big zone receives one endpoint", zones: zonesCPU(8000, 4000, 4000),
			endpoints: spread(3, 3, 3), opts: opts(0.25, false),
			perZone: map[string]int{"a": 4, "b": 2, "c": 3}, inZone: 0.5*3/4 + 0.25 + 0.25,
		},
		{
			name: "hysteresis band: 7 endpoints stay off when off", zones: equal,
			endpoints: spread(3, 2, 2), opts: opts(0.25, false), reason: InsufficientNumberOfEndpoints,
		},
		{
			name: "hysteresis band: 7 endpoints stay on when on", zones: equal,
			endpoints: ownHints(spread(3, 2, 2)), opts: opts(0.25, true),
			perZone: map[string]int{"a": 3, "b": 2, "c": 2}, inZone: 1,
		},
		{
			name: "stale donation within the bound is kept", zones: equal,
			endpoints: withHints(spread(5, 4, 4), []string{"a", "a", "a", "a", "b", "b", "b", "b", "b", "c", "c", "c", "c"}),
			opts:      opts(0.25, true), perZone: map[string]int{"a": 4, "b": 5, "c": 4},
		},
		{
			name: "a zone that fell short takes back its own endpoint first", zones: equal,
			endpoints: withHints(spread(4, 4, 2), []string{"a", "a", "a", "a", "b", "b", "b", "b", "a", "c"}),
			opts:      opts(0.25, true), perZone: map[string]int{"a": 3, "b": 4, "c": 3}, moved: 2,
		},
		{name: "endpoint without zone", zones: equal, endpoints: append(spread(3, 3, 3), Endpoint{Key: "x"}),
			opts: opts(0.25, false), reason: EndpointWithoutZone},
		{name: "endpoint in a zone without Nodes", zones: equal, endpoints: append(spread(3, 3, 3), Endpoint{Key: "x", Zone: "z"}),
			opts: opts(0.25, false), reason: EndpointInZoneWithoutNodes},
		{name: "one zone", zones: zonesCPU(4000), endpoints: spread(9), opts: opts(0.25, false), reason: NodesReadyInOneZoneOnly},
		{name: "zone without CPU", zones: zonesCPU(4000, 0, 4000), endpoints: spread(3, 3, 3), opts: opts(0.25, false),
			reason: InsufficientNodeInfo},
		{name: "negative threshold", zones: equal, endpoints: spread(3, 3, 3), opts: opts(-0.1, false), reason: InvalidOptions},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Allocate(tc.zones, tc.endpoints, tc.opts)
			if tc.reason != "" {
				if res.Enabled || res.Hints != nil || res.Reason != tc.reason || res.Message == "" {
					t.Fatalf("want off with %s, got %+v", tc.reason, res)
				}
				return
			}
			if !res.Enabled || res.Reason != "" || len(res.Hints) != len(tc.endpoints) {
				t.Fatalf("want hints, got %+v", res)
			}
			got := hintCounts(res.Hints)
			for z, want := range tc.perZone {
				if got[z] != want {
					t.Errorf("zone %s: %d endpoints hinted, want %d (all %v)", z, got[z], want, got)
				}
			}
			traffic := ExpectedTraffic(tc.zones, tc.endpoints, res.Hints)
			if traffic.MaxOverload > tc.opts.OverloadThreshold+1e-9 {
				t.Errorf("max overload %.4f above threshold", traffic.MaxOverload)
			}
			if tc.inZone != 0 && abs(traffic.InZone-tc.inZone) > 1e-9 {
				t.Errorf("in-zone %.6f, want %.6f", traffic.InZone, tc.inZone)
			}
			if res.Moved != tc.moved {
				t.Errorf("moved %d endpoints, want %d", res.Moved, tc.moved)
			}
		})
	}
}

func TestAllocateIsLazy(t *testing.T) {
	zones := zonesCPU(3000, 5000, 8000)
	eps := spread(2, 30, 7)
	first := Allocate(zones, eps, opts(0.25, false))
	if !first.Enabled || !first.Changed {
		t.Fatalf("first allocation: %+v", first)
	}
	again := Allocate(zones, withHints(eps, first.Hints), opts(0.25, true))
	if !again.Enabled || again.Changed || again.Moved != 0 {
		t.Fatalf("unchanged input changed hints: %+v", again)
	}
	for i := range first.Hints {
		if first.Hints[i] != again.Hints[i] {
			t.Fatalf("endpoint %d moved from %s to %s", i, first.Hints[i], again.Hints[i])
		}
	}
}

func TestAllocateMovesTheFewest(t *testing.T) {
	zones := zonesCPU(4000, 4000, 4000)
	// 12 endpoints, 4 per zone, all hinted home; then zone c loses two Pods: c needs
	// ceil(10/3/1.25) = 3 endpoints and has 2, so exactly one endpoint must move.
	eps := ownHints(spread(4, 4, 2))
	res := Allocate(zones, eps, opts(0.25, true))
	if !res.Enabled || res.Moved != 1 {
		t.Fatalf("want exactly one move, got %+v", res)
	}
	if got := hintCounts(res.Hints)["c"]; got != 3 {
		t.Fatalf("zone c has %d hints, want 3", got)
	}
}

func TestAllocateTurnsOffWithChange(t *testing.T) {
	res := Allocate(zonesCPU(1000, 1000), ownHints(spread(1, 1)), opts(0.25, true))
	if res.Enabled || !res.Changed || res.Moved != 2 {
		t.Fatalf("removing two hints must be reported as a change: %+v", res)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
