// Package locality_test runs the cluster allocation end to end on an in-process ClusterSet
// (pkg/clustersettest): two members of unequal Node CPU export one Service with
// PreferSameCluster; the test reads the allocation every member publishes on its derived
// Service and what a node agent in each member derives from it (agent.Convert, the agent's
// own conversion, with the member's imported slices).
package locality_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/agent/selection"
	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

const threshold = 0.25

func TestClusterAllocationEndToEnd(t *testing.T) {
	if _, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer); err != nil {
		t.Skipf("envtest binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// One 4-CPU Node per zone (3 zones) in each member; big gets three more below: 24 CPU
	// against small's 12, so big's clients send two thirds of the traffic.
	cs, err := clustersettest.Start(ctx, clustersettest.Options{Members: []string{"big", "small"}, LeaseDuration: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Stop() }()
	big, small := cs.Member("big"), cs.Member("small")
	for _, zone := range clustersettest.DefaultZones {
		addNode(ctx, t, big, "big-extra-"+zone, zone)
	}

	ns, err := cs.CreateNamespace(ctx, "locality-")
	if err != nil {
		t.Fatal(err)
	}
	// small runs 1 Pod, big 6: small's one endpoint cannot carry a third of the traffic
	// within +25% of its fair share (7 endpoints: 1/7 each), so small must spill.
	for _, m := range []*clustersettest.Member{big, small} {
		svc := builders.MakeService(ns, "web").Selector("app", "web").Port("http", 80, intstr.FromInt32(8080)).Obj()
		if err := m.Client.Create(ctx, svc); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		createPod(ctx, t, big, ns, fmt.Sprintf("web-%d", i), clustersettest.DefaultZones[i%3])
	}
	createPod(ctx, t, small, ns, "web-0", "zone-a")
	for _, m := range []*clustersettest.Member{big, small} {
		exportPreferSameCluster(ctx, t, m, ns)
	}

	// 1. Spill under imbalance, within the bound: small keeps exactly what its endpoint
	// carries at +25%, big keeps everything.
	fair := 36000.0 / 7
	smallKeeps := (1 + threshold) * 1 * fair / 12000
	got := waitForAllocation(ctx, t, []*clustersettest.Member{big, small}, ns, func(a allocation.Allocation) bool {
		s, okS := a.For("small")
		b, okB := a.For("big")
		return okS && okB && b.Local == 1 && math.Abs(s.Local-smallKeeps) < 1e-9
	})
	t.Logf("spill: %s", got)
	s, _ := got.For("small")
	if len(s.Spill) != 1 || s.Spill[0].To != "big" {
		t.Fatalf("small must spill to big only: %+v", s)
	}
	// The bound, recomputed from the published shares: small's endpoint at +25%, big's below.
	smallLoad := s.Local * 12000 / (1 * fair)
	bigLoad := (24000 + s.Spill[0].Share*12000) / (6 * fair)
	if smallLoad > 1+threshold+1e-9 || bigLoad > 1+threshold+1e-9 {
		t.Fatalf("over the bound: small %.3f, big %.3f", smallLoad, bigLoad)
	}
	// What the agents derive: small's node keeps smallKeeps on its own endpoint.
	checkAgent(ctx, t, small, ns, map[string]float64{"small": smallKeeps, "big": 1 - smallKeeps})
	checkAgent(ctx, t, big, ns, map[string]float64{"big": 1})
	// Nothing changes, so nothing is written: the derived Services keep their version.
	assertNoWrites(ctx, t, []*clustersettest.Member{big, small}, ns, 3*time.Second)

	// 2. The preference: with three Pods small carries its own third, and keeps everything.
	createPod(ctx, t, small, ns, "web-1", "zone-b")
	createPod(ctx, t, small, ns, "web-2", "zone-c")
	got = waitForAllocation(ctx, t, []*clustersettest.Member{big, small}, ns, func(a allocation.Allocation) bool {
		s, _ := a.For("small")
		b, _ := a.For("big")
		return a.Mode == "Local" && s.Local == 1 && b.Local == 1
	})
	t.Logf("local: %s", got)
	checkAgent(ctx, t, small, ns, map[string]float64{"small": 1})

	// 3. Failover: small's Pods all become not ready; its clients go to big.
	for i := range 3 {
		if err := small.SetPodReady(ctx, ns, fmt.Sprintf("web-%d", i), false); err != nil {
			t.Fatal(err)
		}
	}
	got = waitForAllocation(ctx, t, []*clustersettest.Member{big, small}, ns, func(a allocation.Allocation) bool {
		s, _ := a.For("small")
		return s.Local == 0 && len(s.Spill) == 1 && s.Spill[0].To == "big" && s.Spill[0].Share == 1
	})
	t.Logf("failover: %s", got)
	checkAgent(ctx, t, small, ns, map[string]float64{"big": 1})

	// 4. They return: taking all of small's traffic back at once is within the bound, so it does.
	for i := range 3 {
		if err := small.SetPodReady(ctx, ns, fmt.Sprintf("web-%d", i), true); err != nil {
			t.Fatal(err)
		}
	}
	waitForAllocation(ctx, t, []*clustersettest.Member{big, small}, ns, func(a allocation.Allocation) bool {
		s, _ := a.For("small")
		return a.Mode == "Local" && s.Local == 1
	})
}

func addNode(ctx context.Context, t *testing.T, m *clustersettest.Member, name, zone string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	if err := m.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status = corev1.NodeStatus{Capacity: cpu, Allocatable: cpu, Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}
	if err := m.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

func createPod(ctx context.Context, t *testing.T, m *clustersettest.Member, ns, name, zone string) {
	t.Helper()
	if _, err := m.CreatePod(ctx, ns, clustersettest.Pod{Name: name, Labels: map[string]string{"app": "web"}, Zone: zone}); err != nil {
		t.Fatal(err)
	}
}

func exportPreferSameCluster(ctx context.Context, t *testing.T, m *clustersettest.Member, ns string) {
	t.Helper()
	e := builders.MakeServiceExport(ns, "web").Annotation(v1alpha1.AnnotationTrafficDistribution, v1alpha1.PreferSameCluster).Obj()
	if err := m.Client.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
}

func derived(ctx context.Context, m *clustersettest.Member, ns string) (*corev1.Service, error) {
	svc := &corev1.Service{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.DerivedServiceName(ns, "web")}, svc)
	return svc, err
}

// waitForAllocation waits until every member publishes the same allocation and it satisfies ok.
func waitForAllocation(ctx context.Context, t *testing.T, members []*clustersettest.Member, ns string, ok func(allocation.Allocation) bool) allocation.Allocation {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var values []string
		for _, m := range members {
			if svc, err := derived(ctx, m, ns); err == nil {
				values = append(values, svc.Annotations[allocation.Annotation])
			}
		}
		last = fmt.Sprint(values)
		if len(values) == len(members) && values[0] != "" && allEqual(values) {
			if a, err := allocation.Parse(values[0]); err == nil && ok(a) {
				return a
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("allocation not reached; last published: %s", last)
	return allocation.Allocation{}
}

func allEqual(v []string) bool {
	for _, s := range v[1:] {
		if s != v[0] {
			return false
		}
	}
	return true
}

func assertNoWrites(ctx context.Context, t *testing.T, members []*clustersettest.Member, ns string, d time.Duration) {
	t.Helper()
	versions := map[string]string{}
	for _, m := range members {
		svc, err := derived(ctx, m, ns)
		if err != nil {
			t.Fatal(err)
		}
		versions[m.Name] = svc.ResourceVersion
	}
	time.Sleep(d)
	for _, m := range members {
		svc, err := derived(ctx, m, ns)
		if err != nil {
			t.Fatal(err)
		}
		if svc.ResourceVersion != versions[m.Name] {
			t.Errorf("member %s rewrote its derived Service without a change (%s -> %s): %v", m.Name, versions[m.Name], svc.ResourceVersion, svc.Annotations)
		}
	}
}

// checkAgent converts the member's derived Service as a node agent of that member would and
// checks the share of new connections each cluster's endpoints receive.
func checkAgent(ctx context.Context, t *testing.T, m *clustersettest.Member, ns string, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got map[string]float64
	for time.Now().Before(deadline) {
		got = agentShares(ctx, t, m, ns)
		if sharesNear(got, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("member %s's agent sends %v, want %v", m.Name, got, want)
}

func agentShares(ctx context.Context, t *testing.T, m *clustersettest.Member, ns string) map[string]float64 {
	svc, err := derived(ctx, m, ns)
	if err != nil {
		return nil
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := m.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
		t.Fatal(err)
	}
	in := agent.ServiceInputs{Service: svc}
	clusterOf := map[string]string{}
	for i := range list.Items {
		s := &list.Items[i]
		in.Slices = append(in.Slices, s)
		for _, e := range s.Endpoints {
			clusterOf[e.Addresses[0]] = s.Labels[mcsv1beta1.LabelSourceCluster]
		}
	}
	out := agent.Convert(in, selection.Node{Name: "client-node", Zone: "zone-a", Cluster: m.Name})
	if out.Skip != "" || len(out.Service.Ports) != 1 {
		return nil
	}
	total := 0.0
	byCluster := map[string]float64{}
	for _, e := range out.Service.Ports[0].Endpoints {
		w := float64(max(e.Weight, 1))
		byCluster[clusterOf[e.Addr.Addr().String()]] += w
		total += w
	}
	for k := range byCluster {
		byCluster[k] /= total
	}
	return byCluster
}

// sharesNear compares within the quantization of DefaultWeightBudget.
func sharesNear(got, want map[string]float64) bool {
	for k, v := range want {
		if math.Abs(got[k]-v) > 2.0/selection.DefaultWeightBudget {
			return false
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && v > 0 {
			return false
		}
	}
	return true
}
