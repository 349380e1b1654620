package multicluster

import (
	"slices"
	"testing"

	"k8s.io/client-go/tools/events"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
)

// One event per kind of change, naming every cluster: a ClusterSet of ten members starting at
// once must not cost ten events per import per member.
func TestAnnounceClustersOneEventPerKindOfChange(t *testing.T) {
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
		created      bool
		want         []string
	}{
		{"created: its creation event names the clusters", nil, []string{"a", "b"}, exported("a", "b"), true, nil},
		{"two clusters arrive", []string{"a"}, []string{"a", "b", "c"}, exported("a", "b", "c"), false,
			[]string{"Normal ClusterImported Importing the endpoints of clusters b, c"}},
		{"one arrives, one lapses, one unexports", []string{"a", "b"}, []string{"c"}, exported("b", "c"), false, []string{
			"Normal ClusterImported Importing the endpoints of cluster c",
			"Warning ClusterWithdrawn The Lease in the broker of cluster b has lapsed: endpoints withdrawn until it is renewed",
			"Normal ClusterUnexported No longer exported by cluster a",
		}},
		{"nothing changed", []string{"a"}, []string{"a"}, exported("a"), false, nil},
	}
	for _, tc := range tests {
		recorder := events.NewFakeRecorder(10)
		r := &importReconciler{recorder: recorder}
		r.announceClusters(&mcsv1beta1.ServiceImport{}, tc.before, tc.live, tc.records, tc.created)
		close(recorder.Events)
		var got []string
		for e := range recorder.Events {
			got = append(got, e)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: events %q, want %q", tc.name, got, tc.want)
		}
	}
}
