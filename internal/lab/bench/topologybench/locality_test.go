package topologybench

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench/clustersim"
)

func TestLocalityPartPassesItsChecksAndDraws(t *testing.T) {
	dir := t.TempDir()
	o := &localityOptions{cases: 3000, threshold: 0.25, seed: clustersim.DefaultSeed}
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
	if len(rep.Figures) != 2 || filepath.Dir(rep.Figures[0].Path) != dir {
		t.Fatalf("figures %+v", rep.Figures)
	}
}

func TestLocalityChecksFlagWhatBreaks(t *testing.T) {
	res := &clustersim.Result{Feasible: 10, Stats: make([]clustersim.Stats, len(clustersim.Policies))}
	res.Options.OverloadThreshold = 0.25
	res.Stats[0].InCluster.Sum = 5 // spread
	res.Stats[3].InCluster.Sum = 4 // fleetslice, below spread
	res.Stats[3].OverBound = 1
	res.BeyondBoundCost = 2
	for _, c := range localityChecks(res) {
		if c.Passed() {
			t.Errorf("%q not flagged", c.Name)
		}
	}
}
