package multicluster

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// A reconcile that read the export from a cache behind its own status write sees the old
// conditions: its write conflicts, and it must not announce the transition a second time (a
// restarted manager was seen repeating its events that way). Publishing itself is announced by
// no event (the Ready condition says it), so the conflict transition stands for them all.
func TestExportTransitionAnnouncedOnlyOnceItsStatusLands(t *testing.T) {
	s := runtime.NewScheme()
	if err := mcsv1beta1.Install(s); err != nil {
		t.Fatal(err)
	}
	stale := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(stale.DeepCopy()).
		WithStatusSubresource(&mcsv1beta1.ServiceExport{}).Build()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(stale), stale); err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	r := &exportReconciler{local: c, recorder: recorder, self: "a"}
	ready := func(export *mcsv1beta1.ServiceExport) *mcsv1beta1.ServiceExportStatus {
		status := export.Status.DeepCopy()
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionTrue,
			Reason: string(mcsv1beta1.ServiceExportReasonExported), Message: "published"})
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: string(mcsv1beta1.ServiceExportConditionConflict), Status: metav1.ConditionTrue,
			Reason: "PortConflict", Message: "port 80 differs"})
		return status
	}
	if err := r.writeStatus(ctx, stale, ready(stale)); err != nil {
		t.Fatal(err)
	}
	// The same reconcile again, from the export as the cache still had it.
	if err := r.writeStatus(ctx, stale, ready(stale)); err != nil {
		t.Fatalf("a conflict from a stale read must be left to the newer export's event: %v", err)
	}
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	if want := []string{"Warning ExportConflict PortConflict: port 80 differs"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
