package multicluster

import (
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// resumedKeys reads what the outage queued again, waiting briefly for its sender.
func resumedKeys(t *testing.T, o *brokerOutage, want int) []string {
	t.Helper()
	var got []string
	timeout := time.After(5 * time.Second)
	for len(got) < want {
		select {
		case e := <-o.resumedExports():
			got = append(got, e.Object.GetNamespace()+"/"+e.Object.GetName())
		case <-timeout:
			t.Fatalf("%d exports queued again, want %d: %v", len(got), want, got)
		}
	}
	select {
	case e := <-o.resumedExports():
		t.Fatalf("%v queued again as well", e.Object.GetName())
	case <-time.After(50 * time.Millisecond):
	}
	slices.Sort(got)
	return got
}

// Exports whose publication failed during a broker outage are queued again the moment the
// broker answers, instead of waiting out the back-off every failure earned them (up to 10 s
// after a minute down: the tail of the 3 x 1,000 bench's broker comeback). A short outage, or
// a refusal, leaves them to their back-off.
func TestExportsFailedInAnOutageAreQueuedAgainWhenTheBrokerAnswers(t *testing.T) {
	now := time.Now()
	o := newBrokerOutage()
	o.now = func() time.Time { return now }
	down := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	refused := apierrors.NewForbidden(schema.GroupResource{Resource: "endpointslices"}, "x", nil)
	web, api, admin := types.NamespacedName{Namespace: "shop", Name: "web"}, types.NamespacedName{Namespace: "shop", Name: "api"}, types.NamespacedName{Namespace: "ops", Name: "admin"}

	o.published(web, down)
	o.published(api, down)
	o.published(web, down) // a retry: still one
	o.published(admin, refused)
	now = now.Add(resumeParkedAfter)
	o.observe(nil) // the prober, or the renewer, sees the broker answer
	if got := resumedKeys(t, o, 2); !slices.Equal(got, []string{"shop/api", "shop/web"}) {
		t.Fatalf("queued again %v, want the two exports that failed in the outage", got)
	}

	// An overloaded broker failing a request now and then: its short outages end without
	// queuing anything again, and what they parked is forgotten.
	o.published(web, apierrors.NewTooManyRequests("busy", 1))
	now = now.Add(resumeParkedAfter / 10)
	o.published(api, nil)
	resumedKeys(t, o, 0)
	now = now.Add(time.Minute)
	o.published(web, down)
	now = now.Add(time.Second)
	o.observe(nil)
	resumedKeys(t, o, 0)
}
