package v1alpha1

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestAddToSchemeRegistersTheRecordKinds(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for kind, obj := range map[string]runtime.Object{
		"ServiceExportRecord":     &ServiceExportRecord{},
		"ServiceExportRecordList": &ServiceExportRecordList{},
	} {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil || len(gvks) != 1 || gvks[0] != GroupVersion.WithKind(kind) {
			t.Fatalf("%s registered as %v (%v), want %v", kind, gvks, err, GroupVersion.WithKind(kind))
		}
	}
}

func TestServiceExportRecordDeepCopyIsIndependent(t *testing.T) {
	timeout := int32(30)
	original := &ServiceExportRecord{
		ObjectMeta: metav1.ObjectMeta{Name: "east.shop.cart", Labels: map[string]string{LabelSourceCluster: "east"}},
		Spec: ServiceExportRecordSpec{
			ClusterID:             "east",
			Ports:                 []mcsv1beta1.ServicePort{{Name: "http", Port: 80}},
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}},
			ExportedLabels:        map[string]string{"a": "b"},
		},
	}
	clone := original.DeepCopyObject().(*ServiceExportRecord)
	if !reflect.DeepEqual(clone, original) {
		t.Fatal("deep copy differs from the original")
	}
	clone.Spec.Ports[0].Port = 81
	*clone.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = 1
	clone.Spec.ExportedLabels["a"] = "c"
	if original.Spec.Ports[0].Port != 80 || timeout != 30 || original.Spec.ExportedLabels["a"] != "b" {
		t.Fatal("changing the deep copy changed the original")
	}
}
