package importplan

import (
	"slices"
	"testing"

	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
)

// One event per kind of loss, naming every cluster, and none for arrivals: a ClusterSet of ten
// members starting at once must not cost an event per import per member.
func TestLostClustersOneEventPerKindOfChange(t *testing.T) {
	exported := func(ids ...string) []merge.Record {
		var out []merge.Record
		for _, id := range ids {
			out = append(out, merge.Record{ClusterID: id})
		}
		return out
	}
	tests := []struct {
		name         string
		before, live []string
		records      []merge.Record
		want         []string
	}{
		{"created: the status names its clusters", nil, []string{"a", "b"}, exported("a", "b"), nil},
		{"two clusters arrive", []string{"a"}, []string{"a", "b", "c"}, exported("a", "b", "c"), nil},
		{"one arrives, one lapses, one unexports", []string{"a", "b"}, []string{"c"}, exported("b", "c"), []string{
			"Warning ClusterWithdrawn The Lease in the broker of cluster b has lapsed: endpoints withdrawn until it is renewed",
			"Normal ClusterUnexported No longer exported by cluster a",
		}},
		{"two lapse", []string{"a", "b", "c"}, []string{"c"}, exported("a", "b", "c"), []string{
			"Warning ClusterWithdrawn The Lease in the broker of clusters a, b has lapsed: endpoints withdrawn until it is renewed",
		}},
		{"nothing changed", []string{"a"}, []string{"a"}, exported("a"), nil},
	}
	for _, tc := range tests {
		var got []string
		for _, e := range lostClusters(tc.before, tc.live, tc.records) {
			got = append(got, e.Type+" "+e.Reason+" "+e.Message)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: events %q, want %q", tc.name, got, tc.want)
		}
	}
}
