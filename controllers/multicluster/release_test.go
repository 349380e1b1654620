package multicluster

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

// New imports held back wait for every peer still publishing, so the import controller is told
// to look at every Service again only once no peer is left: after the first reading when none
// publishes, or when the last one finishes, not once per member that finishes (each a sweep of
// every Service of the ClusterSet that holds every import back again). The export controller
// reads IsLive alone and hears of liveness flips only.
func TestHeldImportsAreReleasedOnceNoPeerPublishes(t *testing.T) {
	ctx := context.Background()
	publishing := map[string]string{v1alpha1.AnnotationPublishingSince: "2026-12-07T00:00:00Z"}
	lease := func(cluster string, annotations map[string]string) client.Object {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "broker", Name: liveness.LeaseName(cluster),
				Labels: map[string]string{v1alpha1.LabelSourceCluster: cluster}, Annotations: annotations},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: time.Now()}, LeaseDurationSeconds: ptr.To(int32(30))},
		}
	}
	m := newMembership("a", "broker", 30*time.Second, nil)
	m.initialWait = time.Minute
	imports, exports := m.subscribe(), m.subscribeLiveness()
	step := func(name string, wantImports, wantExports []string, leases ...client.Object) {
		t.Helper()
		m.reader = brokerFake(t, nil, leases...)
		if _, err := m.Reconcile(ctx, membershipKey); err != nil {
			t.Fatal(err)
		}
		if got := drain(imports); !slices.Equal(got, wantImports) {
			t.Errorf("%s: the import controller heard %q, want %q", name, got, wantImports)
		}
		if got := drain(exports); !slices.Equal(got, wantExports) {
			t.Errorf("%s: the export controller heard %q, want %q", name, got, wantExports)
		}
	}
	// "*" is an announcement of every Service; a name, of that cluster's.
	step("first reading, b and c publishing", nil, nil,
		lease("a", publishing), lease("b", publishing), lease("c", publishing))
	step("b done, c still publishing", nil, nil, lease("a", publishing), lease("b", nil), lease("c", publishing))
	step("c done, a itself still publishing", []string{"*"}, nil, lease("a", publishing), lease("b", nil), lease("c", nil))
	step("a done", []string{"*"}, nil, lease("a", nil), lease("b", nil), lease("c", nil))
	step("nothing changed", nil, nil, lease("a", nil), lease("b", nil), lease("c", nil))

	// A manager starting into a set where nobody publishes releases what it held back for want
	// of reading the Leases, at once.
	m = newMembership("a", "broker", 30*time.Second, nil)
	m.initialWait = time.Minute
	imports, exports = m.subscribe(), m.subscribeLiveness()
	step("first reading, nobody publishing", []string{"*"}, nil, lease("a", nil), lease("b", nil))
}

// Liveness flips reach both controllers; a release only the import controller.
func TestAnnouncementsReachTheControllersThatReadThem(t *testing.T) {
	ctx := context.Background()
	m := newMembership("a", "broker", 30*time.Second, nil)
	imports, exports := m.subscribe(), m.subscribeLiveness()
	for _, c := range []struct {
		name                     string
		change                   liveness.Change
		release                  bool
		wantImports, wantExports []string
	}{
		{"a cluster flipped", liveness.Change{Clusters: []string{"b", "c"}}, false, []string{"b", "c"}, []string{"b", "c"}},
		{"a grace period ended", liveness.Change{Everyone: true}, false, []string{"*"}, []string{"*"}},
		{"held imports released", liveness.Change{}, true, []string{"*"}, nil},
		{"both", liveness.Change{Clusters: []string{"b"}}, true, []string{"*", "b"}, []string{"b"}},
	} {
		if err := announce(ctx, m.subscribers, c.change, c.release); err != nil {
			t.Fatal(err)
		}
		if got := drain(imports); !slices.Equal(got, c.wantImports) {
			t.Errorf("%s: the import controller heard %q, want %q", c.name, got, c.wantImports)
		}
		if got := drain(exports); !slices.Equal(got, c.wantExports) {
			t.Errorf("%s: the export controller heard %q, want %q", c.name, got, c.wantExports)
		}
	}
}

// drain returns the announcements waiting on ch: "*" for every Service, else the cluster named.
func drain(ch chan event.GenericEvent) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			cluster := e.Object.GetLabels()[v1alpha1.LabelSourceCluster]
			if cluster == "" {
				cluster = "*"
			}
			out = append(out, cluster)
		default:
			return out
		}
	}
}
