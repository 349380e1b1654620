package multicluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// runRenewer starts a renewer whose periodic renewals are an hour apart, lets its first renewal
// land, stops it and returns the Lease as the stop left it, with the moment of the stop.
func runRenewer(t *testing.T, leave bool) (*coordinationv1.Lease, time.Time) {
	t.Helper()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).Build()
	r := &leaseRenewer{reader: c, writer: c, namespace: "broker", self: "a",
		duration: 30 * time.Second, interval: time.Hour, writeTimeout: 5 * time.Second,
		leaveOnShutdown: leave, leaving: &atomic.Bool{}, log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Start(ctx) }()

	key := client.ObjectKey{Namespace: "broker", Name: liveness.LeaseName("a")}
	landed := func(ctx context.Context) (bool, error) {
		return c.Get(ctx, key, &coordinationv1.Lease{}) == nil, nil
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, landed); err != nil {
		t.Fatalf("the first renewal never landed: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	stopped := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start returned %v", err)
	}
	after := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), key, after); err != nil {
		return nil, stopped
	}
	return after, stopped
}

func TestRenewerHandsOverAFullLeaseWhenItStops(t *testing.T) {
	lease, stopped := runRenewer(t, false)
	if lease == nil {
		t.Fatal("a stop without leaving deleted the Lease")
	}
	if renewed := lease.Spec.RenewTime.Time; renewed.Before(stopped) {
		t.Fatalf("the Lease was last renewed at %s, before the stop at %s: a restart would get less than a lease duration",
			renewed.Format(time.StampMicro), stopped.Format(time.StampMicro))
	}
}

func TestRenewerThatLeavesDoesNotRenewOnItsWayOut(t *testing.T) {
	if lease, _ := runRenewer(t, true); lease != nil {
		t.Fatalf("leaving on shutdown left the Lease behind, renewed at %s", lease.Spec.RenewTime.Format(time.StampMicro))
	}
}

// The member's Lease lives in the broker, so the member's own API server being down or hanging
// (a restart) must not hold back its renewals: peers would withdraw its endpoints. The demand
// the renewal publishes is read from the member's API server (its ClusterProperties, uncached);
// here that read hangs until its context ends, and the renewals must go on at their interval.
func TestRenewalsGoOnWhileTheMemberAPIServerHangs(t *testing.T) {
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	broker := fake.NewClientBuilder().WithScheme(s).Build()
	nodes := fake.NewClientBuilder().WithScheme(s).WithObjects(builders.MakeNode("n1").CPU("4").Ready(true).Obj()).Build()
	var hanging atomic.Bool
	// A scheme of its own: the fake client registers the unstructured ClusterProperty in it.
	propsScheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	props := interceptor.NewClient(fake.NewClientBuilder().WithScheme(propsScheme).WithObjects(property("cluster.clusterset.k8s.io", "a")).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if hanging.Load() {
				<-ctx.Done()
				return ctx.Err()
			}
			return c.List(ctx, list, opts...)
		},
	})
	const interval = 100 * time.Millisecond
	r := &leaseRenewer{reader: broker, writer: broker, namespace: "broker", self: "a",
		duration: time.Second, interval: interval, writeTimeout: 5 * time.Second,
		leaving: &atomic.Bool{}, log: logr.Discard(), demand: nodeDemand(nodes, props)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	key := client.ObjectKey{Namespace: "broker", Name: liveness.LeaseName("a")}
	lease := &coordinationv1.Lease{}
	published := func(ctx context.Context) (bool, error) {
		err := broker.Get(ctx, key, lease)
		return err == nil && lease.Annotations[v1alpha1.AnnotationClusterProperties] != "", nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, published); err != nil {
		t.Fatalf("the first renewal never published the demand: %v", err)
	}
	hanging.Store(true)
	hungAt := time.Now()
	// Ten renew intervals with the member API server hanging: every renewal must land on time,
	// so the Lease is never older than two intervals when looked at.
	for time.Since(hungAt) < 10*interval {
		if err := broker.Get(ctx, key, lease); err != nil {
			t.Fatal(err)
		}
		if age := time.Since(lease.Spec.RenewTime.Time); age > 3*interval {
			t.Fatalf("%s after the member API server began to hang the Lease was last renewed %s ago (renew interval %s)",
				time.Since(hungAt).Round(time.Millisecond), age.Round(time.Millisecond), interval)
		}
		time.Sleep(interval / 4)
	}
	if lease.Annotations[v1alpha1.AnnotationClusterProperties] != `{"cluster.clusterset.k8s.io":"a"}` ||
		lease.Annotations[allocation.AnnotationWorkerMilliCPU] != "4000" {
		t.Fatalf("the renewals dropped the last published demand: %v", lease.Annotations)
	}
}
