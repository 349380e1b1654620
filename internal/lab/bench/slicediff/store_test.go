package slicediff

import (
	"context"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

func testSlice(addresses ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: serviceName + "-",
			Labels: map[string]string{discoveryv1.LabelServiceName: serviceName, discoveryv1.LabelManagedBy: endpointslice.ManagedBy}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, a := range addresses {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return s
}

func TestStoreKeepsAPIServerSemantics(t *testing.T) {
	s := newStore(epoch)
	created, err := s.createSlice(testSlice("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if created.Name == "" || created.UID == "" || created.Generation != 1 || created.ResourceVersion == "" {
		t.Fatalf("create did not fill server fields: %+v", created.ObjectMeta)
	}

	// A label-only or identical update leaves the generation alone unless labels change.
	same := created.DeepCopy()
	updated, err := s.updateSlice(same)
	if err != nil || updated.Generation != 1 {
		t.Fatalf("identical update: generation %d, err %v", updated.Generation, err)
	}
	changed := updated.DeepCopy()
	changed.Endpoints = append(changed.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}})
	updated2, err := s.updateSlice(changed)
	if err != nil || updated2.Generation != 2 || updated2.UID != created.UID {
		t.Fatalf("content update: %+v, err %v", updated2.ObjectMeta, err)
	}

	// Writing from a stale copy conflicts; an unconditional update (no resourceVersion) does not.
	if _, err := s.updateSlice(changed); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: want conflict, got %v", err)
	}
	blind := changed.DeepCopy()
	blind.ResourceVersion, blind.UID = "", ""
	if _, err := s.updateSlice(blind); err != nil {
		t.Fatalf("unconditional update: %v", err)
	}

	wrong := types.UID("other")
	if err := s.deleteSlice(keyOf(created), &wrong); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a wrong UID precondition: want conflict, got %v", err)
	}
	var gone *discoveryv1.EndpointSlice
	s.sliceDeleted = func(sl *discoveryv1.EndpointSlice) { gone = sl }
	if err := s.deleteSlice(keyOf(created), &created.UID); err != nil || gone == nil {
		t.Fatalf("delete: %v, reported %v", err, gone)
	}
	w := s.writes
	if w.Creates != 1 || w.Updates != 3 || w.Deletes != 1 || w.RequestBytes <= 0 || w.WatchBytes <= w.RequestBytes {
		t.Errorf("counted %+v", w)
	}
}

func TestStoreClientAnswersTheReconcilersQueries(t *testing.T) {
	s := newStore(epoch)
	c := newStoreClient(s)
	ctx := context.Background()
	s.putService(serviceObject(false))
	for _, sl := range []*discoveryv1.EndpointSlice{testSlice("10.0.0.1"), testSlice("10.0.0.2")} {
		if err := c.Create(ctx, sl); err != nil {
			t.Fatal(err)
		}
	}
	other := testSlice("10.0.0.3")
	other.Labels[discoveryv1.LabelServiceName] = "other"
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	list := &discoveryv1.EndpointSliceList{}
	// The same query the reconciler makes: by the service-name field index, in the namespace.
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{"endpointslice.serviceName": serviceName}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("listed %d slices of %s, want 2", len(list.Items), serviceName)
	}
	list.Items[0].Endpoints[0].Addresses[0] = "changed"
	if stored := s.slicesOf(serviceKey, endpointslice.ManagedBy)[0]; stored.Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Error("a copying list handed out the stored object")
	}
	if err := c.List(ctx, &discoveryv1.EndpointSliceList{}, client.MatchingFields{"no.such.index": "x"}); err == nil {
		t.Error("listing by an unknown index succeeded")
	}
	if err := c.Update(ctx, &list.Items[1]); err != nil || list.Items[1].Generation != 1 {
		t.Errorf("update through the client: %v, generation %d", err, list.Items[1].Generation)
	}
	if err := c.Delete(ctx, &list.Items[1], client.Preconditions{UID: ptr.To(list.Items[1].UID)}); err != nil {
		t.Error(err)
	}
	if err := c.Create(ctx, serviceObject(false)); err == nil {
		t.Error("the store took a write of a Service from a controller")
	}
}

func TestVerifyCatchesBrokenSlices(t *testing.T) {
	w, err := newWorld(context.Background(), Fleetslice, 3)
	if err != nil {
		t.Fatal(err)
	}
	steadyState(w, Size{Endpoints: 5, Nodes: 3}, true, false)
	w.sync()
	if len(w.result.Failures) != 0 {
		t.Fatalf("a correct sync failed: %v", w.result.Failures)
	}
	// Corrupt the stored slice behind the controller's back: one endpoint twice, one missing.
	stored := w.store.slicesOf(serviceKey, endpointslice.ManagedBy)[0]
	stored.Endpoints[1] = stored.Endpoints[0]
	w.verify()
	if _, ok := w.result.Failures["endpoints"]; !ok {
		t.Errorf("a duplicated endpoint went unnoticed: %v", w.result.Failures)
	}
	stored.Endpoints[0].Zone = ptr.To("elsewhere")
	w.verify()
	if _, ok := w.result.Failures["zones"]; !ok {
		t.Errorf("a wrong zone went unnoticed: %v", w.result.Failures)
	}
}
