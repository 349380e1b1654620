package endpointslice

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

func metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, _, err := testutil.MetricValue(name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fakeReconciler is a Reconciler over a fake client that answers its field selectors.
func fakeReconciler(t *testing.T, objs ...client.Object) *Reconciler {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...)
	for _, index := range FieldIndexes() {
		b = b.WithIndex(index.Object, index.Field, index.Extract)
	}
	r := testReconciler(t)
	r.Client = b.Build()
	r.Recorder = events.NewFakeRecorder(100)
	return r
}

func TestStaleCacheIsRequeuedNotAnError(t *testing.T) {
	svc := testService()
	svc.Name = "stale-cache"
	slice := ourSlice(svc, "stale-cache-1", port(8080), "10.0.0.1")
	r := fakeReconciler(t, svc, slice)
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	// The controller wrote a newer generation than the cache holds.
	written := slice.DeepCopy()
	written.Generation = slice.Generation + 5
	r.tracker.Wrote(key, written)

	stale := map[string]string{"result": syncStale}
	before := metric(t, metricsPrefix+"syncs_total", stale)
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("a stale cache must not be an error, got %v", err)
	}
	if res.RequeueAfter != staleCacheRetry {
		t.Fatalf("result %+v, want a requeue after %s", res, staleCacheRetry)
	}
	if got := metric(t, metricsPrefix+"syncs_total", stale); got != before+1 {
		t.Fatalf("syncs_total{result=stale} went from %v to %v", before, got)
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(context.Background(), list); err != nil || len(list.Items) != 1 || list.Items[0].Generation != slice.Generation {
		t.Fatalf("a stale sync must write nothing: %v, %+v", err, list.Items)
	}
}

func TestSyncMetricsCarryUpstreamLabels(t *testing.T) {
	svc := testService()
	svc.Name = "metered-close"
	svc.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	r := fakeReconciler(t, svc)
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	changed := map[string]string{"topology": "Disabled", "traffic_distribution": corev1.ServiceTrafficDistributionPreferClose}
	closeServices := map[string]string{"traffic_distribution": corev1.ServiceTrafficDistributionPreferClose}
	success := map[string]string{"result": syncSuccess}
	beforeChanged := metric(t, metricsPrefix+"endpointslices_changed_per_sync", changed)
	beforeServices := metric(t, metricsPrefix+"services_count_by_traffic_distribution", closeServices)
	beforeSuccess := metric(t, metricsPrefix+"syncs_total", success)
	beforeCreates := metric(t, metricsPrefix+"changes_total", map[string]string{"operation": "create"})

	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, metricsPrefix+"endpointslices_changed_per_sync", changed); got != beforeChanged+1 {
		t.Errorf("endpointslices_changed_per_sync%v observed %v times, want %v", changed, got, beforeChanged+1)
	}
	if got := metric(t, metricsPrefix+"services_count_by_traffic_distribution", closeServices); got != beforeServices+1 {
		t.Errorf("services_count_by_traffic_distribution%v = %v, want %v", closeServices, got, beforeServices+1)
	}
	if got := metric(t, metricsPrefix+"syncs_total", success); got != beforeSuccess+1 {
		t.Errorf("syncs_total{result=success} = %v, want %v", got, beforeSuccess+1)
	}
	// The Service selects no Pods: one placeholder slice is created.
	if got := metric(t, metricsPrefix+"changes_total", map[string]string{"operation": "create"}); got != beforeCreates+1 {
		t.Errorf("changes_total{operation=create} = %v, want %v", got, beforeCreates+1)
	}

	// Auto wins over trafficDistribution, and the Service leaves the traffic_distribution count.
	auto := svc.DeepCopy()
	auto.Annotations = map[string]string{AnnotationTopologyMode: "Auto"}
	if err := r.Client.Update(context.Background(), auto); err != nil {
		t.Fatal(err)
	}
	autoChanged := map[string]string{"topology": "Auto", "traffic_distribution": ""}
	beforeAuto := metric(t, metricsPrefix+"endpointslices_changed_per_sync", autoChanged)
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, metricsPrefix+"endpointslices_changed_per_sync", autoChanged); got != beforeAuto+1 {
		t.Errorf("endpointslices_changed_per_sync%v observed %v times, want %v", autoChanged, got, beforeAuto+1)
	}
	if got := metric(t, metricsPrefix+"services_count_by_traffic_distribution", closeServices); got != beforeServices {
		t.Errorf("services_count_by_traffic_distribution%v = %v after the Service switched to Auto, want %v", closeServices, got, beforeServices)
	}
}

func TestTrafficDistributionLabel(t *testing.T) {
	cases := []struct {
		annotations map[string]string
		td          *string
		want        string
	}{
		{nil, nil, ""},
		{nil, ptr.To(corev1.ServiceTrafficDistributionPreferClose), corev1.ServiceTrafficDistributionPreferClose},
		{nil, ptr.To(corev1.ServiceTrafficDistributionPreferSameNode), corev1.ServiceTrafficDistributionPreferSameNode},
		{nil, ptr.To("Elsewhere"), ""},
		{map[string]string{AnnotationTopologyMode: "Auto"}, ptr.To(corev1.ServiceTrafficDistributionPreferClose), ""},
	}
	for _, tc := range cases {
		svc := testService()
		svc.Annotations, svc.Spec.TrafficDistribution = tc.annotations, tc.td
		mode, _ := hints.ModeOf(svc)
		if got := trafficDistributionLabel(svc, mode); got != tc.want {
			t.Errorf("annotations %v, trafficDistribution %v: label %q, want %q", tc.annotations, tc.td, got, tc.want)
		}
	}
}
