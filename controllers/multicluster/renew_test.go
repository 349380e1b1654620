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

	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
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
