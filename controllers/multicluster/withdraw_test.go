package multicluster

import (
	"context"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

func importedSlice(ns, name, cluster, managedBy string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			mcsv1beta1.LabelSourceCluster: cluster, discoveryv1.LabelManagedBy: managedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
}

func TestWithdrawRemovesOnlyTheLostClustersImportedSlices(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		importedSlice("a", "lost-1", "lost", sliceplan.ManagedBy),
		importedSlice("b", "lost-2", "lost", sliceplan.ManagedBy),
		importedSlice("a", "live-1", "live", sliceplan.ManagedBy),
		importedSlice("a", "foreign", "lost", "someone-else"),
	).Build()
	if err := (withdrawer{reader: c, writer: c}).withdraw(context.Background(), "lost"); err != nil {
		t.Fatal(err)
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := c.List(context.Background(), list, client.InNamespace("")); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, s := range list.Items {
		left = append(left, s.Namespace+"/"+s.Name)
	}
	if len(left) != 2 || left[0] != "a/foreign" || left[1] != "a/live-1" {
		t.Fatalf("left = %v, want a/foreign and a/live-1", left)
	}
}
