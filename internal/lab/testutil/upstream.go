package testutil

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	upstream "k8s.io/endpointslice"
	upstreamutil "k8s.io/endpointslice/util"
)

// UpstreamReconciler builds kube-controller-manager's EndpointSlice reconciler (k8s.io/endpointslice
// v0.37.2) over a fake API server that knows nodes, for tests that use upstream as the oracle or
// the baseline. The fake does not implement generateName, so creates are given numbered names.
func UpstreamReconciler(t testing.TB, nodes []*corev1.Node, maxPerSlice int32) (*upstream.Reconciler, *fake.Clientset) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		if err := indexer.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset()
	named := 0
	client.PrependReactor("create", "endpointslices", func(action clienttesting.Action) (bool, runtime.Object, error) {
		slice := action.(clienttesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
		if slice.Name == "" {
			named++
			slice.Name = fmt.Sprintf("%s%d", slice.GenerateName, named)
		}
		return false, nil, nil
	})
	r := upstream.NewReconciler(client, corelisters.NewNodeLister(indexer), maxPerSlice,
		upstreamutil.NewEndpointSliceTracker(), nil, record.NewFakeRecorder(1000), "upstream")
	return r, client
}
