package e2e

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/ops/statusview"
)

// The locality spec runs real node agents (the agent binary, dry-run, one per zone of each
// member, as `fleetslice run` starts them, but without --cluster-id: they learn their cluster
// from the ClusterProperty localset writes) and reads the rulesets they render. The members
// differ in CPU (the suite doubles cluster-2's Nodes: 42 against 84 CPUs), so cluster-2's
// clients send two thirds of the traffic.
var _ = Describe("capacity-aware locality across the local ClusterSet", Ordered, func() {
	const ns = "locality-e2e"
	threshold := locality.DefaultOptions().OverloadThreshold
	var (
		small, big string
		clients    map[string]client.Client
		agents     map[string][]agentRun // member -> its agents
		started    time.Time
	)

	BeforeAll(func(ctx SpecContext) {
		started = time.Now()
		small, big = clusterSet.Members[0], clusterSet.Members[1]
		bin := GinkgoT().TempDir()
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/fleetslice/fleetslice/cmd/agent")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "building the agent: %s", out)
		GinkgoWriter.Printf("agent built in %s\n", time.Since(started).Round(time.Second))

		clients = map[string]client.Client{}
		for _, m := range clusterSet.Members {
			c, err := clusterSet.Client(m)
			Expect(err).NotTo(HaveOccurred())
			clients[m] = c
			Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			Expect(c.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
			})).To(Succeed())
		}
		// One Pod per agent Node (one per zone) in small, two in big: 3 + 6 endpoints, each
		// cluster's share of the endpoints equal to its share of the CPU.
		for i := range 3 {
			createWebPod(ctx, clients[small], ns, fmt.Sprintf("web-%d", i), clusterSet.AgentNodes(small)[i])
		}
		for i := range 6 {
			createWebPod(ctx, clients[big], ns, fmt.Sprintf("web-%d", i), clusterSet.AgentNodes(big)[i%3])
		}
		for m, want := range map[string]int{small: 3, big: 6} {
			Eventually(func(g Gomega) {
				pods := &corev1.PodList{}
				g.Expect(clients[m].List(ctx, pods, client.InNamespace(ns))).To(Succeed())
				ready := 0
				for i := range pods.Items {
					if podIsReady(&pods.Items[i]) {
						ready++
					}
				}
				g.Expect(ready).To(Equal(want), "ready Pods in %s", m)
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		}
		for _, m := range clusterSet.Members {
			Expect(clients[m].Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
				Annotations: map[string]string{v1alpha1.AnnotationTrafficDistribution: v1alpha1.PreferSameCluster}}})).To(Succeed())
		}

		agents = map[string][]agentRun{}
		logDir := GinkgoT().TempDir()
		for _, m := range clusterSet.Members {
			for _, node := range clusterSet.AgentNodes(m) {
				run := agentRun{member: m, node: node, ruleset: filepath.Join(logDir, node+".nft")}
				run.p, err = localset.StartProcess(logDir, "agent-"+node, filepath.Join(bin, "agent"),
					"--kubeconfig", clusterSet.Kubeconfig, "--context", localset.Context(m), "--node-name", node,
					"--dataplane=dry-run", "--dry-run-output", run.ruleset, "--ip-families=IPv4",
					"--metrics-bind-address=0", "--health-probe-bind-address=0")
				Expect(err).NotTo(HaveOccurred())
				DeferCleanup(func() { Expect(run.p.Stop(10 * time.Second)).To(Succeed()) })
				agents[m] = append(agents[m], run)
			}
		}
	}, NodeTimeout(5*time.Minute))

	AfterAll(func() {
		GinkgoWriter.Printf("locality spec took %s in all (agent build included)\n", time.Since(started).Round(time.Second))
	})

	It("publishes each member's unequal Node CPU on its broker Lease", func(ctx SpecContext) {
		broker, err := clusterSet.Client(clusterSet.Broker)
		Expect(err).NotTo(HaveOccurred())
		for m, milli := range map[string]string{small: "42000", big: "84000"} {
			Eventually(func(g Gomega) {
				lease := &coordinationv1.Lease{}
				g.Expect(broker.Get(ctx, client.ObjectKey{Namespace: multicluster.DefaultNamespace, Name: liveness.LeaseName(m)}, lease)).To(Succeed())
				g.Expect(lease.Annotations).To(HaveKeyWithValue(allocation.AnnotationWorkerMilliCPU, milli))
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		}
	})

	It("has every agent take its cluster id from the ClusterProperty, with no --cluster-id", func(ctx SpecContext) {
		for m, runs := range agents {
			for _, run := range runs {
				Eventually(func() (string, error) {
					b, err := os.ReadFile(run.p.Log)
					return string(b), err
				}).WithContext(ctx).WithTimeout(time.Minute).Should(And(
					ContainSubstring("cluster id from ClusterProperty cluster.clusterset.k8s.io"),
					ContainSubstring(`"clusterID":"`+m+`"`)), "%s", run.p.Describe(20))
			}
		}
	})

	// Each step waits until both members publish the same allocation, checks it against the
	// numbers the bound gives, then waits until every agent's rules send each cluster the share
	// the allocation gives its own cluster, and checks the expected load of every endpoint
	// under the rules of all agents together (demand by CPU) against the bound.
	step := func(ctx SpecContext, name string, want map[string]map[string]float64, boundMet bool) {
		GinkgoHelper()
		begin := time.Now()
		a := waitForPublished(ctx, clients, ns, func(a allocation.Allocation) bool { return allocationNear(a, want) })
		GinkgoWriter.Printf("%s: allocation %s after %s\n", name, a, time.Since(begin).Round(100*time.Millisecond))
		for m, runs := range agents {
			for _, run := range runs {
				Eventually(func(g Gomega) {
					got := run.shares(g, ctx, clients, ns)
					g.Expect(sharesClose(got, want[m])).To(BeTrue(), "%s's agent sends %v, want %v", run.node, got, want[m])
				}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "%s", run.p.Describe(20))
			}
		}
		GinkgoWriter.Printf("%s: every agent's rules follow it after %s\n", name, time.Since(begin).Round(100*time.Millisecond))
		for _, m := range clusterSet.Members {
			run := agents[m][0]
			weights, err := endpointWeights(run.ruleset, ns, names.DerivedServiceName(ns, "web"), "http")
			Expect(err).NotTo(HaveOccurred())
			GinkgoWriter.Printf("%s: %s's map elements per endpoint %v\n", name, run.node, weights)
		}
		load := expectedLoads(ctx, agents, clients, ns)
		GinkgoWriter.Printf("%s: largest expected endpoint load %.3f of the fair share\n", name, load)
		if boundMet {
			Expect(load).To(BeNumerically("<=", 1+threshold+0.01), "over the %.0f%% bound", 100*threshold)
		}
	}

	It("keeps each cluster's traffic at home while its endpoints can carry its demand", func(ctx SpecContext) {
		step(ctx, "preference", map[string]map[string]float64{small: {small: 1}, big: {big: 1}}, true)
	})

	It("spills the smallest share, within the bound, when big keeps fewer endpoints than its demand", func(ctx SpecContext) {
		for i := 3; i < 6; i++ {
			Expect(clients[big].Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}})).To(Succeed())
		}
		// 3 + 3 endpoints: big's three may carry (1+threshold) * 3/6 of all traffic, big's
		// clients send 84/126 of it, so big keeps (1+threshold)*(3/6)*(126/84) of its own.
		keeps := (1 + threshold) * (3.0 / 6) * (126.0 / 84)
		step(ctx, "spill", map[string]map[string]float64{small: {small: 1}, big: {big: keeps, small: 1 - keeps}}, true)

		By("showing it in the status view of `fleetslice run`: where traffic goes, and what each agent balances over")
		derivedPort := ns + "/" + names.DerivedServiceName(ns, "web") + ":http"
		for m, c := range clients {
			view := statusview.Collect(ctx, m, c)
			idx := slices.IndexFunc(view.Imports, func(i statusview.Import) bool { return i.Namespace == ns && i.Name == "web" })
			Expect(idx).NotTo(Equal(-1), "%s lists no import %s/web", m, ns)
			GinkgoWriter.Printf("status view of %s: %s/web traffic %q\n", m, ns, view.Imports[idx].Traffic)
			Expect(view.Imports[idx].Traffic).To(Equal(small + ": home; " + big + ": 94% home, 6% to " + small))
			// Big's agents balance over all six endpoints (three at a small weight), small's over its own three.
			for _, run := range agents[m] {
				Expect(statusview.ReadAgent(run.node, run.ruleset).Endpoints).To(HaveKeyWithValue(derivedPort, map[string]int{small: 3, big: 6}[m]))
			}
		}
	})

	It("fails small's clients over to big when all of small's Pods become not ready", func(ctx SpecContext) {
		for i := range 3 {
			setPodReady(ctx, clients[small], ns, fmt.Sprintf("web-%d", i), false)
		}
		// Big's three endpoints now serve everything: at the fair share, since they are all.
		step(ctx, "failover", map[string]map[string]float64{small: {big: 1}, big: {big: 1}}, true)
	})

	It("brings small's traffic back, and big's spill, when they are ready again", func(ctx SpecContext) {
		for i := range 3 {
			setPodReady(ctx, clients[small], ns, fmt.Sprintf("web-%d", i), true)
		}
		keeps := (1 + threshold) * (3.0 / 6) * (126.0 / 84)
		step(ctx, "return", map[string]map[string]float64{small: {small: 1}, big: {big: keeps, small: 1 - keeps}}, true)
	})
})

// allocationNear reports whether every cluster's row sends the shares of want (cluster ->
// destination -> share), within rounding.
func allocationNear(a allocation.Allocation, want map[string]map[string]float64) bool {
	for cluster, dest := range want {
		row, ok := a.For(cluster)
		if !ok {
			return false
		}
		got := map[string]float64{cluster: row.Local}
		for _, s := range row.Spill {
			got[s.To] += s.Share
		}
		for k := range got {
			if math.Abs(got[k]-dest[k]) > 1e-6 {
				return false
			}
		}
		for k, v := range dest {
			if math.Abs(got[k]-v) > 1e-6 {
				return false
			}
		}
	}
	return true
}

// sharesClose compares an agent's shares with the wanted ones within the quantization of its
// weights (a budget of about a thousand map elements).
func sharesClose(got, want map[string]float64) bool {
	for k := range got {
		if _, ok := want[k]; !ok && got[k] > 0 {
			return false
		}
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 0.005 {
			return false
		}
	}
	return len(got) > 0
}

func createWebPod(ctx SpecContext, c client.Client, ns, name, node string) {
	GinkgoHelper()
	Expect(c.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	})).To(Succeed())
}

// setPodReady sets a Running Pod's Ready condition as a kubelet would after a readiness probe.
// kwok leaves it so: its pod-ready stage only acts on Pending Pods (if it put it back, the
// failover step would never see its allocation).
func setPodReady(ctx SpecContext, c client.Client, ns, name string, ready bool) {
	GinkgoHelper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	Eventually(func(g Gomega) {
		pod := &corev1.Pod{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "kwok runs %s first", name)
		found := false
		for i := range pod.Status.Conditions {
			if cond := &pod.Status.Conditions[i]; cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
				cond.Status, cond.LastTransitionTime, found = status, metav1.Now(), found || cond.Type == corev1.PodReady
			}
		}
		if !found {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()})
		}
		g.Expect(c.Status().Update(ctx, pod)).To(Succeed())
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}
