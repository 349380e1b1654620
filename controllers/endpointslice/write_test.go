package endpointslice

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func writeTestSlice(name string, uid types.UID) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: name, UID: uid},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
}

// writeReconciler's API server refuses creates with createErr and logs every write.
func writeReconciler(createErr error, existing ...client.Object) (*Reconciler, *[]string) {
	var calls []string
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(existing...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			calls = append(calls, "create "+obj.GetName())
			if createErr != nil {
				return createErr
			}
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			calls = append(calls, "delete "+obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}).Build()
	return &Reconciler{Client: c, tracker: newSliceTracker()}, &calls
}

func TestWriteCreatesBeforeDeletingAndTracksWhatLanded(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	old := writeTestSlice("web-old", "uid-old")
	r, calls := writeReconciler(nil, old)
	p := &syncPlan{create: []*discoveryv1.EndpointSlice{writeTestSlice("web-new", "")}, delete: []*discoveryv1.EndpointSlice{old}}
	apiTime, err := r.write(context.Background(), svc, p)
	if err != nil {
		t.Fatal(err)
	}
	if apiTime <= 0 {
		t.Fatalf("the writes' API time is %s, want the time their requests took", apiTime)
	}
	if want := []string{"create web-new", "delete web-old"}; !slices.Equal(*calls, want) {
		t.Fatalf("writes %v, want %v", *calls, want)
	}
	if !r.tracker.IsOwnWrite(types.NamespacedName{Namespace: "shop", Name: "web"}, p.create[0]) {
		t.Fatal("the created slice is not tracked as this controller's write")
	}
}

func TestWriteStopsAtAFailedCreate(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "web-new", nil)
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"namespace terminating: nothing left to do", terminating, false},
		{"any other failure is retried", apierrors.NewServiceUnavailable("injected"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := writeTestSlice("web-old", "uid-old")
			r, calls := writeReconciler(tc.err, old)
			p := &syncPlan{create: []*discoveryv1.EndpointSlice{writeTestSlice("web-new", "")}, delete: []*discoveryv1.EndpointSlice{old}}
			_, err := r.write(context.Background(), svc, p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want an error: %v", err, tc.wantErr)
			}
			if want := []string{"create web-new"}; !slices.Equal(*calls, want) {
				t.Fatalf("writes %v, want %v: no delete after a failed create", *calls, want)
			}
		})
	}
}
