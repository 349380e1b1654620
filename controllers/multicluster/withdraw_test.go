package multicluster

import (
	"context"
	"fmt"
	"sync"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

func TestWithdrawRemovesOnlyTheLostClustersImportedSlices(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		builders.MakeImportedSlice("a", "lost-1", "", "lost").Obj(),
		builders.MakeImportedSlice("b", "lost-2", "", "lost").Obj(),
		builders.MakeImportedSlice("a", "live-1", "", "live").Obj(),
		builders.MakeImportedSlice("a", "foreign", "", "lost").ManagedBy("someone-else").Obj(),
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

// The API server refuses a delete whose UID precondition fails, which spares a slice the import
// controller recreated since the cache was read; the fake client does not check preconditions,
// so this checks every delete carries the UID the cache saw.
func TestWithdrawDeletesOnlyTheSlicesTheCacheSaw(t *testing.T) {
	var slices []client.Object
	for i := range 40 {
		s := builders.MakeImportedSlice("a", fmt.Sprintf("lost-%d", i), "", "lost").Obj()
		s.UID = types.UID(fmt.Sprintf("uid-%d", i))
		slices = append(slices, s)
	}
	cacheView := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(slices...).Build()
	var mu sync.Mutex
	seen := map[string]types.UID{}
	server := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(slices[1:]...).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			do := &client.DeleteOptions{}
			do.ApplyOptions(opts)
			mu.Lock()
			if do.Preconditions != nil && do.Preconditions.UID != nil {
				seen[obj.GetName()] = *do.Preconditions.UID
			}
			mu.Unlock()
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	if err := (withdrawer{reader: cacheView, writer: server}).withdraw(context.Background(), "lost"); err != nil {
		t.Fatalf("withdraw: %v (lost-0, already gone, is no error)", err)
	}
	for i := range 40 {
		if got, want := seen[fmt.Sprintf("lost-%d", i)], types.UID(fmt.Sprintf("uid-%d", i)); got != want {
			t.Errorf("lost-%d deleted with UID precondition %q, want %q", i, got, want)
		}
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := server.List(context.Background(), list); err != nil || len(list.Items) != 0 {
		t.Fatalf("left %d slices: %v", len(list.Items), err)
	}
}
