package multicluster

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// A broker outage is one fact of the whole member. While it lasts less than the grace, an
// export whose change it holds back keeps its conditions and gets no event, however often the
// change is retried (the quick bench counted 2 to 3 status writes and events per changed
// export in a 5 s outage); past the grace it turns Ready=False Pending once, with one event,
// and a refusal (forbidden) while the broker answers is reported once it has lasted its own
// shorter grace.
func TestBrokerOutageIsReportedOnExportsOnlyPastItsGrace(t *testing.T) {
	ctx := context.Background()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := mcsv1beta1.Install(s); err != nil {
		t.Fatal(err)
	}
	export := builders.MakeServiceExport("shop", "web").Obj()
	export.Generation = 1
	export.Status.Conditions = []metav1.Condition{{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceExportReasonExported), Message: "published", ObservedGeneration: 1, LastTransitionTime: metav1.Now()}}
	source := builders.MakeEndpointSlice("shop", "web-1").Label(discoveryv1.LabelServiceName, "web").Obj()
	source.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}
	statusWrites := 0
	local := fake.NewClientBuilder().WithScheme(s).WithObjects(export, builders.MakeService("shop", "web").Selector("app", "web").Port("http", 80, intstr.FromInt32(8080)).Obj(), source).
		WithStatusSubresource(&mcsv1beta1.ServiceExport{}).
		WithIndex(&discoveryv1.EndpointSlice{}, indexLocalSource, localSourceService).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			statusWrites++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	var brokerErr error
	broker := brokerFake(t, &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if brokerErr != nil {
				return brokerErr
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if brokerErr != nil {
				return brokerErr
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	now := time.Now()
	outage := newBrokerOutage()
	outage.now = func() time.Time { return now }
	recorder := events.NewFakeRecorder(100)
	r := &exportReconciler{local: local, broker: broker, brokerNamespace: "broker", self: "east", members: newMembership("east", "broker", time.Minute, broker),
		recorder: recorder, leaving: &atomic.Bool{}, writeTimeout: 5 * time.Second, written: newWrittenSlices(),
		outage: outage, outageGrace: time.Minute, refusalGrace: 30 * time.Second}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(export)}
	ready := func() *metav1.Condition {
		got := &mcsv1beta1.ServiceExport{}
		if err := local.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
	}
	eventsSoFar := func() int { return len(recorder.Events) }

	brokerErr = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for i := range 5 {
		if _, err := r.Reconcile(ctx, req); err == nil {
			t.Fatalf("retry %d: a failed publication must be retried", i)
		}
		now = now.Add(10 * time.Second)
	}
	if statusWrites != 0 || eventsSoFar() != 0 || ready().Status != metav1.ConditionTrue {
		t.Fatalf("within the grace: %d status writes, %d events, Ready %s; want none, none, True", statusWrites, eventsSoFar(), ready().Status)
	}
	now = now.Add(20 * time.Second) // 70 s into the outage
	for range 3 {
		_, _ = r.Reconcile(ctx, req)
	}
	if c := ready(); statusWrites != 1 || eventsSoFar() != 1 || c.Status != metav1.ConditionFalse || c.Reason != string(mcsv1beta1.ServiceExportReasonPending) {
		t.Fatalf("past the grace: %d status writes, %d events, Ready %s %s; want one write and one event, False Pending", statusWrites, eventsSoFar(), c.Status, c.Reason)
	}

	brokerErr = nil
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if c := ready(); c.Status != metav1.ConditionTrue || outage.lasted() != 0 {
		t.Fatalf("back: Ready %s, outage lasted %s; want True and over", c.Status, outage.lasted())
	}

	// A refusal while the broker answers is reported once it has lasted refusalGrace: a
	// broker just started refuses for a moment (its authorizer and CRDs loading), a policy
	// that refuses the member's writes does so for good.
	source.Endpoints = append(source.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}})
	if err := local.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	brokerErr = apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "x", errors.New("policy"))
	before, writesBefore := eventsSoFar(), statusWrites
	_, _ = r.Reconcile(ctx, req)
	now = now.Add(20 * time.Second)
	_, _ = r.Reconcile(ctx, req)
	if c := ready(); c.Status != metav1.ConditionTrue || eventsSoFar() != before || statusWrites != writesBefore {
		t.Fatalf("refused for 20 s: Ready %s with %d new events; want True and none yet", c.Status, eventsSoFar()-before)
	}
	now = now.Add(11 * time.Second)
	_, _ = r.Reconcile(ctx, req)
	_, _ = r.Reconcile(ctx, req)
	if c := ready(); c.Status != metav1.ConditionFalse || eventsSoFar() != before+1 || statusWrites != writesBefore+1 {
		t.Fatalf("refused for 31 s: Ready %s with %d new events and %d status writes; want False with one of each",
			c.Status, eventsSoFar()-before, statusWrites-writesBefore)
	}
}
