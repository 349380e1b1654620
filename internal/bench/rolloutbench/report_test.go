package rolloutbench

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/internal/bench"
	"github.com/fleetslice/fleetslice/internal/e2ebench"
)

func side(controller string, writes, final int, timeline ...int) e2ebench.Side {
	s := e2ebench.Side{Controller: controller, Cluster: "c-" + controller, Writes: map[string]int{"update": writes}, FinalSlices: final, PeakSlices: final}
	for i, w := range timeline {
		s.Timeline = append(s.Timeline, e2ebench.WritePoint{At: time.Duration(i) * time.Second, Writes: w})
	}
	return s
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
	tests := []struct {
		name  string
		sides []e2ebench.Side
		want  string // a fragment of the one expected failure; empty for none
	}{
		{"sane", []e2ebench.Side{side("fleetslice", 400, 11, 0, 200, 400), side("kube-controller-manager", 430, 13, 0, 430)}, ""},
		{"too many final slices", []e2ebench.Side{side("fleetslice", 400, 12, 0, 400), side("kube-controller-manager", 430, 13, 0, 430)}, "12 slices"},
		{"timeline goes down", []e2ebench.Side{side("fleetslice", 400, 11, 0, 300, 200), side("kube-controller-manager", 430, 13, 0, 430)}, "timeline point 200"},
		{"timeline above the total", []e2ebench.Side{side("fleetslice", 400, 11, 0, 401), side("kube-controller-manager", 430, 13, 0, 430)}, "timeline point 401"},
		{"no writes counted", []e2ebench.Side{side("fleetslice", 400, 11, 0), side("kube-controller-manager", 0, 13, 0)}, "no EndpointSlice writes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := failures(checks(sz, tc.sides))
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
	sides := []e2ebench.Side{side("fleetslice", 400, 11, 0, 400), side("kube-controller-manager", 500, 13, 0, 500)}
	mem := &memory{rows: []memoryRow{
		{process: "fleetslice manager", afterRollout: 60 << 20, atScale: 100 << 20},
		{process: "kube-controller-manager", afterRollout: 150 << 20, atScale: 200 << 20},
		{process: "kube-controller-manager", afterRollout: 170 << 20, atScale: 300 << 20},
	}}
	r, err := buildReport(bench.Env{}, fullSizes, time.Second, sides, mem)
	if err != nil {
		t.Fatal(err)
	}
	ratios := r.Tables[1].Rows[0]
	if ratios[0] != "0.80×" || ratios[4] != "0.33×" || ratios[5] != "1.00×" {
		t.Fatalf("ratios = %v, want writes 0.80×, RSS 0.33× of the whole and 1.00× of the 100 MiB share", ratios)
	}
	last := r.Tables[2].Rows[3]
	if last[3] != "20 MiB" || last[4] != "100 MiB" {
		t.Fatalf("difference row = %v", last)
	}
}
