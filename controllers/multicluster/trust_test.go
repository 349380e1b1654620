package multicluster

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// TestTrustworthyRecords: a record takes part in the merge only when its spec speaks for the
// cluster and Service its labels name, and its exported metadata fits a ServiceImport (one that
// does not, from a member that did not check, would stop every member's import of the Service).
func TestTrustworthyRecords(t *testing.T) {
	good := func() *v1alpha1.ServiceExportRecord {
		return &v1alpha1.ServiceExportRecord{
			ObjectMeta: metav1.ObjectMeta{Name: names.RecordName("east", "shop", "web"), Labels: names.RecordLabels("east", "shop", "web")},
			Spec:       v1alpha1.ServiceExportRecordSpec{ClusterID: "east", ServiceNamespace: "shop", ServiceName: "web", ExportedLabels: map[string]string{"tier": "front"}},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*v1alpha1.ServiceExportRecord)
		want bool
	}{
		{"as published", func(*v1alpha1.ServiceExportRecord) {}, true},
		{"spec speaks for another cluster", func(r *v1alpha1.ServiceExportRecord) { r.Spec.ClusterID = "west" }, false},
		{"spec speaks for another Service", func(r *v1alpha1.ServiceExportRecord) { r.Spec.ServiceName = "api" }, false},
		{"no Service labels", func(r *v1alpha1.ServiceExportRecord) { delete(r.Labels, v1alpha1.LabelServiceName) }, false},
		{"label value no object may carry", func(r *v1alpha1.ServiceExportRecord) { r.Spec.ExportedLabels["tier"] = strings.Repeat("v", 64) }, false},
		{"annotation key no object may carry", func(r *v1alpha1.ServiceExportRecord) { r.Spec.ExportedAnnotations = map[string]string{"a b": ""} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.edit(r)
			if got := trustworthy(r); got != tc.want {
				t.Fatalf("trustworthy = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSyncsReadOnlyTrustworthyRecords: an import's sync finds a Service's records through the
// index of trustworthy ones (as the export's conflict check does), so a record the index left
// out takes no part in it, and every trustworthy one does.
func TestSyncsReadOnlyTrustworthyRecords(t *testing.T) {
	record := func(cluster, service string) *v1alpha1.ServiceExportRecord {
		return &v1alpha1.ServiceExportRecord{
			ObjectMeta: metav1.ObjectMeta{Namespace: "broker", Name: names.RecordName(cluster, "shop", service), Labels: names.RecordLabels(cluster, "shop", service)},
			Spec:       v1alpha1.ServiceExportRecordSpec{ClusterID: cluster, ServiceNamespace: "shop", ServiceName: service, Type: "ClusterSetIP"},
		}
	}
	east, west := record("east", "web"), record("west", "web")
	disguised := record("north", "web")
	disguised.Spec.ClusterID = "east" // labelled as north, speaking for east
	broker := brokerFake(t, nil, east, west, disguised)

	imports := &importReconciler{broker: broker, brokerNamespace: "broker", self: "west"}
	got, err := imports.records(context.Background(), types.NamespacedName{Namespace: "shop", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	var clusters []string
	for _, r := range got {
		clusters = append(clusters, r.ClusterID)
	}
	slices.Sort(clusters)
	if !slices.Equal(clusters, []string{"east", "west"}) {
		t.Fatalf("the import read the records of %v, want east and west only", clusters)
	}
	if keys := trustedRecordService(disguised); keys != nil {
		t.Fatalf("the disguised record is indexed under %v", keys)
	}
}
