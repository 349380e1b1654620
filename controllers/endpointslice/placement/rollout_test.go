package placement

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// rollout replays a Deployment rolling update (maxSurge 25%, maxUnavailable
// 0) at the Pod level: each round adds a surge of new not-ready Pods, makes
// them ready, marks as many old Pods terminating and then deletes them.
// sync is called after every change with the Pods that exist. Pod IPs are
// a fixed random permutation, so address order says nothing about age (as
// with real IPAM, which hands out addresses per node).
func rollout(replicas int, sync func(pods []*corev1.Pod)) {
	node := "node-a"
	ips := rand.New(rand.NewPCG(uint64(replicas), 42)).Perm(2 * replicas)
	mk := func(name string, i int, ready bool) *corev1.Pod {
		i = ips[i]
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
			Spec:       corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{
				Phase:      corev1.PodRunning,
				PodIPs:     []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			},
		}
	}
	var old, fresh []*corev1.Pod
	for i := range replicas {
		old = append(old, mk(fmt.Sprintf("old-%d", i), i, true))
	}
	all := func() []*corev1.Pod { return append(append([]*corev1.Pod{}, old...), fresh...) }
	sync(all())
	surge := (replicas + 3) / 4
	next := replicas
	for len(old) > 0 {
		batch := min(surge, len(old))
		start := len(fresh)
		for range batch {
			fresh = append(fresh, mk(fmt.Sprintf("new-%d", next), next, false))
			next++
		}
		sync(all())
		for _, p := range fresh[start:] {
			p.Status.Conditions[0].Status = corev1.ConditionTrue
		}
		sync(all())
		for _, p := range old[:batch] {
			p.DeletionTimestamp = ptr.To(metav1.Now())
		}
		sync(all())
		old = old[batch:]
		sync(all())
	}
}

func rolloutService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "svc"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.1", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

type rolloutStats struct{ writes, maxSlices, finalSlices int }

func (s rolloutStats) String() string {
	return fmt.Sprintf("%d writes, at most %d slices, %d at the end", s.writes, s.maxSlices, s.finalSlices)
}

// upstreamRollout runs the rollout through the upstream reconciler.
func upstreamRollout(t *testing.T, replicas int) rolloutStats {
	svc := rolloutService()
	r, client := testutil.UpstreamReconciler(t, []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}}, 100)
	var stats rolloutStats
	rollout(replicas, func(pods []*corev1.Pod) {
		list, err := client.DiscoveryV1().EndpointSlices("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		existing := make([]*discoveryv1.EndpointSlice, len(list.Items))
		for i := range list.Items {
			existing[i] = &list.Items[i]
		}
		client.ClearActions()
		if err := r.Reconcile(logr.Discard(), svc, pods, existing, time.Time{}); err != nil {
			t.Fatal(err)
		}
		for _, a := range client.Actions() {
			if v := a.GetVerb(); v == "create" || v == "update" || v == "delete" {
				stats.writes++
			}
		}
		list, _ = client.DiscoveryV1().EndpointSlices("ns").List(context.Background(), metav1.ListOptions{})
		stats.finalSlices = len(list.Items)
		stats.maxSlices = max(stats.maxSlices, stats.finalSlices)
	})
	return stats
}

// fleetsliceRollout runs the rollout through Desired and Plan, checking
// every placement invariant after every sync.
func fleetsliceRollout(t *testing.T, replicas, slack int) rolloutStats {
	svc := rolloutService()
	nodes := map[string]*corev1.Node{"node-a": {ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}}
	c := newCluster()
	var stats rolloutStats
	rollout(replicas, func(pods []*corev1.Pod) {
		sets := endpoints.Desired(svc, endpoints.PodsOf(pods), nodes)
		if len(sets) != 1 {
			t.Fatalf("%d sets", len(sets))
		}
		in := Input{Existing: c.list(), Desired: sets[0].Endpoints, AddressType: sets[0].AddressType,
			Ports: sets[0].Ports, MaxPerSlice: 100, Slack: slack}
		r := planAndCheck(t, c, in)
		stats.writes += r.Writes()
		stats.finalSlices = len(c.slices)
		stats.maxSlices = max(stats.maxSlices, stats.finalSlices)
	})
	return stats
}

// TestRolloutAgainstUpstream replays the same rolling update through the
// upstream controller and through fleetslice (with and without compaction)
// and logs API writes and slice counts; run with -v to see them. Upstream
// places new endpoints in random order, so its numbers vary a little from
// run to run. The fleetslice runs check every placement invariant after
// every sync, including the ceil(n/100)+slack bound.
func TestRolloutAgainstUpstream(t *testing.T) {
	for _, replicas := range []int{300, 1000} {
		up := upstreamRollout(t, replicas)
		lazy := fleetsliceRollout(t, replicas, replicas) // so much slack that compaction never runs
		ours := fleetsliceRollout(t, replicas, 1)
		t.Logf("%d replicas: upstream %v; fleetslice without compaction %v; fleetslice slack 1 %v", replicas, up, lazy, ours)
	}
}
