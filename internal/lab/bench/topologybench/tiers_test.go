package topologybench

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench/tiersim"
)

func TestTiersPartPassesItsChecksAndDraws(t *testing.T) {
	dir := t.TempDir()
	o := &tiersOptions{cases: 1000, threshold: 0.25, seed: tiersim.DefaultSeed}
	rep, err := o.run(context.Background(), bench.Env{Log: io.Discard, FigureDir: dir, FigureLink: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 3 {
		t.Fatalf("%d checks", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if !c.Passed() {
			t.Errorf("%s: %s", c.Name, c.Failure)
		}
	}
	if len(rep.Figures) != 1 || filepath.Dir(rep.Figures[0].Path) != dir {
		t.Fatalf("figures %+v", rep.Figures)
	}
}

func TestTiersChecksFlagWhatBreaks(t *testing.T) {
	res := &tiersim.Result{Feasible: 10, Stats: make([]tiersim.Stats, len(tiersim.Policies))}
	res.Options.OverloadThreshold = 0.25
	res.Stats[3].OverBound = 1
	res.BelowFlat, res.GapNotCost = 1, 2
	for _, c := range tiersChecks(res) {
		if c.Passed() {
			t.Errorf("%q not flagged", c.Name)
		}
	}
}
