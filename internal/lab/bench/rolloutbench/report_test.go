package rolloutbench

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

// phase is a measured phase with writes, final slices, a convergence time, one latency and a
// timeline of cumulative writes, one point a second.
func phase(writes, final int, converged, latency time.Duration, timeline ...int) e2ebench.Phase {
	p := e2ebench.Phase{Writes: map[string]int{"update": writes}, FinalSlices: final, PeakSlices: final,
		Converged: converged, Latency: e2ebench.Latencies{latency}, Stats: e2ebench.ControllerStats{Syncs: 10, Unchanged: -1}}
	for i, w := range timeline {
		p.Timeline = append(p.Timeline, e2ebench.WritePoint{At: time.Duration(i) * time.Second, Writes: w})
	}
	return p
}

func sidesOf(ours, theirs e2ebench.Phase) []e2ebench.Side {
	setup := phase(100, 11, time.Second, time.Second, 0, 100)
	return []e2ebench.Side{
		{Controller: "fleetslice", Setup: setup, Rollouts: []e2ebench.Phase{ours, ours}},
		{Controller: "kube-controller-manager", Setup: setup, Rollouts: []e2ebench.Phase{theirs, theirs}},
	}
}

func failures(cs []bench.Check) []string {
	var out []string
	for _, c := range cs {
		if !c.Passed() {
			out = append(out, c.Name+": "+c.Failure)
		}
	}
	return out
}

func TestChecksFlagBrokenResults(t *testing.T) {
	sz := sizes{pods: 1000, memoryPods: 10000, nodes: 50}
	s, ms := time.Second, time.Millisecond
	good := phase(400, 11, 20*s, 1200*ms, 0, 200, 400)
	upstream := phase(600, 13, 20*s, 1300*ms, 0, 600)
	tests := []struct {
		name          string
		ours, theirs  e2ebench.Phase
		quick, nohead bool
		want          string // a fragment of the one expected failure; empty for none
	}{
		{name: "sane", ours: good, theirs: upstream},
		{name: "too many final slices", ours: phase(400, 12, 20*s, 1200*ms, 0, 400), theirs: upstream, want: "12 slices"},
		{name: "timeline goes down", ours: phase(400, 11, 20*s, 1200*ms, 0, 300, 200), theirs: upstream, want: "timeline point 200"},
		{name: "timeline above the total", ours: phase(400, 11, 20*s, 1200*ms, 0, 401), theirs: upstream, want: "timeline point 401"},
		{name: "no writes counted", ours: good, theirs: phase(0, 13, 20*s, s, 0), quick: true, want: "no EndpointSlice writes"},
		{name: "more than 0.8x the writes", ours: phase(481, 11, 20*s, 1200*ms, 0, 481), theirs: upstream, want: "0.80×"},
		{name: "converged later", ours: phase(400, 11, 21*s, 1200*ms, 0, 400), theirs: upstream, want: "21s against 20s"},
		{name: "higher p99 latency", ours: phase(400, 11, 20*s, 1400*ms, 0, 400), theirs: upstream, want: "1.4s against 1.3s"},
		{name: "claims are not held at the quick size", ours: phase(481, 11, 21*s, 1400*ms, 0, 481), theirs: upstream, quick: true},
		{name: "claims are not held outside the headline", ours: phase(481, 11, 21*s, 1400*ms, 0, 481), theirs: upstream, nohead: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := settingResult{setting: setting{name: "defaults", headline: !tc.nohead}, sides: sidesOf(tc.ours, tc.theirs)}
			got := failures(checks(bench.Env{Quick: tc.quick}, sz, []settingResult{res}))
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("unexpected failures %v", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("failures %v, want one containing %q", got, tc.want)
			}
		})
	}
}

func TestChecksFlagMoreWritesToCreate(t *testing.T) {
	sides := sidesOf(phase(400, 11, 20*time.Second, time.Second, 0, 400), phase(600, 13, 20*time.Second, time.Second, 0, 600))
	sides[0].Setup = phase(150, 11, time.Second, time.Second, 0, 150)
	res := settingResult{setting: setting{name: "defaults", headline: true}, sides: sides}
	got := failures(checks(bench.Env{}, fullSizes, []settingResult{res}))
	if len(got) != 1 || !strings.Contains(got[0], "150 against 100") {
		t.Fatalf("failures %v, want the creation writes flagged", got)
	}
}

func TestSizes(t *testing.T) {
	o := &partOptions{}
	if s, err := o.sizes(false); err != nil || s != fullSizes {
		t.Fatalf("full sizes = %+v, %v", s, err)
	}
	if s, err := o.sizes(true); err != nil || s != quickSizes {
		t.Fatalf("quick sizes = %+v, %v", s, err)
	}
	for _, bad := range []partOptions{{pods: 500, memoryPods: 400}, {memoryPods: 20000, nodes: 50}} {
		if _, err := bad.sizes(false); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestReportRatiosAndMemory(t *testing.T) {
	ours, theirs := phase(400, 11, 20*time.Second, time.Second, 0, 400), phase(500, 13, 25*time.Second, 2*time.Second, 0, 500)
	ours.Rolled, theirs.Rolled = 17*time.Second, 19*time.Second // slices trailed by 3 s and 6 s
	ours.FirstLatency, theirs.FirstLatency = e2ebench.Latencies{time.Second}, e2ebench.Latencies{4 * time.Second}
	sides := sidesOf(ours, theirs)
	mem := &memory{rows: []memoryRow{
		{process: "fleetslice manager", afterRollout: 60 << 20, atScale: 100 << 20},
		{process: "kube-controller-manager", afterRollout: 150 << 20, atScale: 200 << 20},
		{process: "kube-controller-manager", afterRollout: 170 << 20, atScale: 300 << 20},
	}}
	for i := range sides {
		sides[i].ScaleUp = &sides[i].Rollouts[0]
	}
	r, err := buildReport(bench.Env{}, fullSizes, []settingResult{{setting: setting{name: "defaults", headline: true, scale: true}, sides: sides, mem: mem}})
	if err != nil {
		t.Fatal(err)
	}
	ratios := r.Tables[1].Rows[0]
	if ratios[1] != "0.80×" || ratios[2] != "0.80×" || ratios[3] != "0.50×" || ratios[5] != "0.50×" || ratios[6] != "0.25×" {
		t.Fatalf("ratios = %v, want writes 0.80×, converged 0.80×, trail 0.50×, p99 0.50× over every write and 0.25× over first writes", ratios)
	}
	if row := r.Tables[0].Rows[0]; row[6] != "17.00 s" || row[7] != "3.00 s" {
		t.Fatalf("rollout row = %v, want the Deployment rolled at 17.00 s and the slices 3.00 s behind it", row)
	}
	memRows := r.Tables[4].Rows
	if diff := memRows[3]; diff[3] != "20 MiB" || diff[4] != "100 MiB" {
		t.Fatalf("difference row = %v", diff)
	}
	if ratio := memRows[4][4]; ratio != "0.33×; 1.00×" {
		t.Fatalf("memory ratio = %q, want 0.33× of the whole and 1.00× of the 100 MiB share", ratio)
	}
}

func TestMemoryCheckHoldsTheManagerToHalfItsFormerSize(t *testing.T) {
	mem := func(manager int64) *memory {
		return &memory{rows: []memoryRow{{atScale: manager}, {atScale: 200 << 20}, {atScale: 210 << 20}}}
	}
	if c := memoryCheck(fullSizes, mem(70<<20)); c.Failure != "" {
		t.Fatalf("70 MiB failed: %s", c.Failure)
	}
	if c := memoryCheck(fullSizes, mem(153<<20)); c.Failure != "153 MiB (kube-controller-manager with its EndpointSlice controller: 210 MiB)" {
		t.Fatalf("153 MiB: %q", c.Failure)
	}
	one := phase(1, 1, time.Second, time.Second, 0, 1)
	quick := []settingResult{{setting: setting{scale: true}, sides: sidesOf(one, one), mem: mem(1 << 30)}}
	for _, c := range checks(bench.Env{Quick: true}, quickSizes, quick) {
		if strings.Contains(c.Name, "resident") {
			t.Fatalf("the quick size is held to the full size's budget: %s", c.Name)
		}
	}
}
