package statusview

import (
	"testing"

	"github.com/fleetslice/fleetslice/api/allocation"
)

func TestFormatAllocationSaysWhereEachClustersTrafficGoes(t *testing.T) {
	a := allocation.Allocation{Mode: "Spill", Clusters: []allocation.Cluster{
		{Cluster: "big", Local: 1},
		{Cluster: "small", Local: 0.5357, Spill: []allocation.Share{{To: "big", Share: 0.4643}}},
		{Cluster: "down", Local: 0, Spill: []allocation.Share{{To: "big", Share: 1}}},
	}}
	want := "big: home; small: 54% home, 46% to big; down: 100% to big"
	if got := FormatAllocation(a); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
