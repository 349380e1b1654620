package multicluster

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

func exportsClient(t *testing.T, names ...string) client.Client {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(memberScheme(t))
	for _, n := range names {
		b = b.WithObjects(&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}})
	}
	return b.Build()
}

// The announcement stays until every export that existed at start was reconciled once, whether
// before or after the list was read; the renewer then renews at once without it.
func TestFirstPublicationEndsWhenEveryStartingExportWasReconciled(t *testing.T) {
	c := exportsClient(t, "web", "db")
	f := newFirstExports(c, time.Hour, logr.Discard())
	r := &leaseRenewer{reader: c, writer: c, namespace: "broker", self: "a",
		duration: 30 * time.Second, interval: time.Hour, writeTimeout: 5 * time.Second,
		leaving: &atomic.Bool{}, log: logr.Discard(), first: f}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.reconciled(types.NamespacedName{Namespace: "ns", Name: "web"}, true) // before the list
	go func() { _ = f.Start(ctx) }()
	go func() { _ = r.Start(ctx) }()

	key := client.ObjectKey{Namespace: "broker", Name: liveness.LeaseName("a")}
	announced := func(want bool) wait.ConditionWithContextFunc {
		return func(ctx context.Context) (bool, error) {
			lease := &coordinationv1.Lease{}
			if err := c.Get(ctx, key, lease); err != nil {
				return false, nil
			}
			return (liveness.PublishingSince(lease) != "") == want, nil
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, announced(true)); err != nil {
		t.Fatalf("the Lease never announced the first publication: %v", err)
	}
	time.Sleep(50 * time.Millisecond) // the list is read
	if f.isDone() {
		t.Fatal("done with db not reconciled")
	}
	f.reconciled(types.NamespacedName{Namespace: "ns", Name: "db"}, false) // invalid: no record
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, announced(false)); err != nil {
		t.Fatalf("the announcement stayed after the last export was reconciled (the renewer renews hourly here): %v", err)
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	// Peers count web's record before they stop waiting; db published none.
	if got := lease.Annotations[v1alpha1.AnnotationFirstPublicationRecords]; got != "1" {
		t.Fatalf("the Lease says the first publication published %q records, want 1", got)
	}
}

func TestFirstPublicationGivesUpAfterTheBound(t *testing.T) {
	f := newFirstExports(exportsClient(t, "web"), 300*time.Millisecond, logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _ = f.Start(ctx) }()
	select {
	case <-f.finished:
	case <-ctx.Done():
		t.Fatal("the first publication never ended with an export never reconciled")
	}
	if f.announcement() != "" {
		t.Fatal("still announced after the bound")
	}
}

func TestNoWaitAnnouncesNothing(t *testing.T) {
	f := newFirstExports(exportsClient(t, "web"), 0, logr.Discard())
	r := &leaseRenewer{first: f}
	if got := r.announce(map[string]string{"x": "y"}); got[v1alpha1.AnnotationPublishingSince] != "" || got["x"] != "y" {
		t.Fatalf("annotations %v", got)
	}
	stale := map[string]string{v1alpha1.AnnotationPublishingSince: "2026-12-05T00:00:00Z"}
	if got := r.announce(stale); len(got) != 0 || len(stale) != 1 {
		t.Fatalf("annotations %v (input %v): the old announcement must go, the input stay", got, stale)
	}
}

// Exports publish only after the first renewal wrote the announcement: a peer that saw a record
// before it would create its import from this member's exports alone.
func TestExportsPublishAfterTheAnnouncementLanded(t *testing.T) {
	c := exportsClient(t, "web")
	f := newFirstExports(c, time.Hour, logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	released := make(chan struct{})
	go func() {
		f.awaitFirstRenewal(ctx)
		close(released)
	}()
	select {
	case <-released:
		t.Fatal("an export went ahead before any renewal")
	case <-time.After(50 * time.Millisecond):
	}
	r := &leaseRenewer{reader: c, writer: c, namespace: "broker", self: "a",
		duration: 30 * time.Second, interval: time.Hour, writeTimeout: 5 * time.Second,
		leaving: &atomic.Bool{}, log: logr.Discard(), first: f}
	go func() { _ = r.Start(ctx) }()
	select {
	case <-released:
	case <-ctx.Done():
		t.Fatal("exports still held back after the first renewal")
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "broker", Name: liveness.LeaseName("a")}, lease); err != nil {
		t.Fatal(err)
	}
	if liveness.PublishingSince(lease) == "" {
		t.Fatal("exports went ahead, but the Lease does not announce the first publication")
	}
}

// A first publication that ends (here: after its bound) releases exports still waiting for a
// renewal that never came.
func TestExportsGoAheadWhenTheFirstPublicationEnds(t *testing.T) {
	f := newFirstExports(exportsClient(t, "web"), 100*time.Millisecond, logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { _ = f.Start(ctx) }()
	f.awaitFirstRenewal(ctx)
	if ctx.Err() != nil {
		t.Fatal("an export waited past the end of the first publication")
	}
}

// A peer's Lease can say its first publication ended before this member's broker cache holds
// the last records it published (a different watch): new imports go on waiting for it until
// the cache holds as many of its records as the Lease says, so none is created without them.
func TestPeersWaitForTheRecordsAFirstPublicationSaysItPublished(t *testing.T) {
	ctx := context.Background()
	lease := func(cluster string, annotations map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "broker", Name: liveness.LeaseName(cluster),
				Labels: map[string]string{v1alpha1.LabelSourceCluster: cluster}, Annotations: annotations},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}, LeaseDurationSeconds: ptr.To(int32(30))},
		}
	}
	record := func(name string) *v1alpha1.ServiceExportRecord {
		return &v1alpha1.ServiceExportRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "broker", Name: name,
			Labels: map[string]string{v1alpha1.LabelSourceCluster: "b"}}}
	}
	m := newMembership("a", "broker", 30*time.Second, nil)
	m.initialWait = time.Minute
	judge := func(step string, wantWaiting bool, objs ...client.Object) reconcile.Result {
		t.Helper()
		m.reader = brokerFake(t, nil, objs...)
		res, err := m.Reconcile(ctx, membershipKey)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(m.Publishing(), "b"); got != wantWaiting {
			t.Fatalf("%s: waiting for b %v, want %v", step, got, wantWaiting)
		}
		return res
	}
	judge("b publishes", true, lease("a", nil), lease("b", map[string]string{v1alpha1.AnnotationPublishingSince: "2026-12-07T00:00:00Z"}), record("b.1"))
	done := lease("b", map[string]string{v1alpha1.AnnotationFirstPublicationRecords: "2"})
	res := judge("b is done, one of its two records cached", true, lease("a", nil), done, record("b.1"))
	if res.RequeueAfter <= 0 || res.RequeueAfter > recordsCatchUpPoll {
		t.Fatalf("requeued after %s: records come without a Lease event, so the count must be looked at again soon", res.RequeueAfter)
	}
	judge("both cached", false, lease("a", nil), done, record("b.1"), record("b.2"))
	judge("a member not waited for is not counted", false, lease("a", nil), lease("b", map[string]string{v1alpha1.AnnotationFirstPublicationRecords: "5"}))

	judge("b starts again", true, lease("a", nil), lease("b", map[string]string{v1alpha1.AnnotationPublishingSince: "2026-12-07T01:00:00Z"}))
	m.initialWait = time.Millisecond
	time.Sleep(10 * time.Millisecond)
	if res := judge("done, a record short, past the bound", false, lease("a", nil), done, record("b.1")); res.RequeueAfter != 0 {
		t.Fatalf("requeued after %s past the bound: a count never reached must not keep the controller polling", res.RequeueAfter)
	}
}

// A member that has just started knows who is still publishing only once it has read the
// Leases: until then new imports wait (an empty Publishing would let them be created from the
// few records already cached), and the first reading sends every Service's imports on.
func TestNewImportsWaitForTheFirstReadingOfTheLeases(t *testing.T) {
	m := newMembership("a", "broker", 30*time.Second, brokerFake(t, nil))
	if !m.PublishingKnown() {
		t.Fatal("with no first publication waited for, nothing is waited for")
	}
	m.initialWait = time.Minute
	if m.PublishingKnown() {
		t.Fatal("publishing known before any Lease was read")
	}
	announced := m.subscribe()
	if _, err := m.Reconcile(context.Background(), membershipKey); err != nil {
		t.Fatal(err)
	}
	if !m.PublishingKnown() {
		t.Fatal("publishing unknown after the Leases were read")
	}
	select {
	case e := <-announced:
		if cluster := e.Object.GetLabels()[v1alpha1.LabelSourceCluster]; cluster != "" {
			t.Fatalf("the first reading announced cluster %q, want every Service", cluster)
		}
	default:
		t.Fatal("the first reading announced nothing: imports held back for it would wait for their next event")
	}
}
