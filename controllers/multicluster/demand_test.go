package multicluster

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

func property(name, value string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(clusterid.GroupVersionKind)
	p.SetName(name)
	_ = unstructured.SetNestedField(p.Object, value, "spec", "value")
	return p
}

// The renewal publishes the member's ClusterProperties beside its CPU; a read that fails keeps
// the last published value, and a change of either re-enqueues the imports.
func TestDemandPublishesClusterProperties(t *testing.T) {
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	nodes := fake.NewClientBuilder().WithScheme(s).WithObjects(builders.MakeNode("n1").CPU("4").Ready(true).Obj()).Build()
	props := fake.NewClientBuilder().WithScheme(s).WithObjects(property("cluster.clusterset.k8s.io", "east"),
		property("region.topology.k8s.io", "eu-west")).Build()
	got := nodeDemand(nodes, props)(context.Background())
	if got[allocation.AnnotationWorkerMilliCPU] != "4000" ||
		got[v1alpha1.AnnotationClusterProperties] != `{"cluster.clusterset.k8s.io":"east","region.topology.k8s.io":"eu-west"}` {
		t.Fatalf("published %v", got)
	}

	failing := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).Build().(client.WithWatch), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("down")
		},
	})
	r := &leaseRenewer{demand: nodeDemand(nodes, failing), interval: time.Second}
	r.readDemand(context.Background())
	kept := r.demandAnnotations(got)
	if kept[v1alpha1.AnnotationClusterProperties] != got[v1alpha1.AnnotationClusterProperties] {
		t.Fatalf("a failed read dropped the published properties: %v", kept)
	}

	before := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: got}}
	after := before.DeepCopy()
	after.Annotations = map[string]string{allocation.AnnotationWorkerMilliCPU: "4000", v1alpha1.AnnotationClusterProperties: `{}`}
	if demandOf(before) == demandOf(after) {
		t.Fatal("a change of the properties alone does not re-enqueue the imports")
	}
}
