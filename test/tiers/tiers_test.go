package tiers

import (
	"fmt"
	"math"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
)

// ownThenRegion is KEP-5939's first story without the continent: the importer's own cluster,
// then its region.
const ownThenRegion = `[{"propertySelector":{"matchExpressions":[{"key":"cluster.clusterset.k8s.io","operator":"In","values":["@SameAsImporter@"]}]}},` +
	`{"propertySelector":{"matchProperties":{"region.topology.k8s.io":"@SameAsImporter@"}}}]`

// Each step changes the ready endpoints (c1 + c2 in region-a, c3 in region-b), waits until every
// member publishes the same allocation, checks it against the closed form (tierSteps), then waits
// until every agent's rules send each cluster its member's row, and checks every endpoint's
// expected load under all agents' rules against the bound. With the real data path, it then
// checks the row in the real agents' nftables and in requests counted from every member.
var _ = Describe("locality in tiers across three members in two regions", Ordered, func() {
	const ns = "tiers-e2e"
	t := locality.DefaultOptions().OverloadThreshold
	var c1, c2, c3 string
	var steps []tierStep

	BeforeAll(func(ctx SpecContext) {
		c1, c2, c3 = clusterSet.Members[0], clusterSet.Members[1], clusterSet.Members[2]
		steps = tierSteps(c1, c2, c3, t)
		// The client Pods first, each alone on its Node until it has an address: kwok v0.8.0
		// makes a Node's pool of Pod IPs when it places the first Pod there, without a lock
		// (load, then store), and Pods it places at once on a fresh Node can get the same
		// address; two web Pods with one address would be one endpoint, and the pod network
		// cannot route both.
		createClients(ctx)
		for _, m := range clusterSet.Members {
			Expect(clients[m].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			Expect(clients[m].Create(ctx, builders.MakeService(ns, "web").Selector("app", "web").Port("http", 80, intstr.FromString("http")).Obj())).To(Succeed())
			for i := range 3 {
				pod := builders.MakePod(ns, fmt.Sprintf("web-%d", i)).Label("app", "web").Obj()
				pod.Spec = corev1.PodSpec{NodeName: agents[m].node, Containers: []corev1.Container{webContainer(m, pod.Name)}}
				Expect(clients[m].Create(ctx, pod)).To(Succeed())
			}
			Expect(clients[m].Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
				Annotations: map[string]string{v1alpha1.AnnotationClusterSelectors: ownThenRegion}}})).To(Succeed())
		}
		for _, m := range clusterSet.Members {
			var pods []corev1.Pod
			Eventually(func(g Gomega) {
				pods = nil
				for _, pns := range []string{ns, clientNamespace} {
					list := &corev1.PodList{}
					g.Expect(clients[m].List(ctx, list, client.InNamespace(pns))).To(Succeed())
					for _, p := range list.Items {
						g.Expect(p.Status.PodIP).NotTo(BeEmpty(), "%s's Pod %s/%s has an address", m, pns, p.Name)
					}
					pods = append(pods, list.Items...)
				}
			}).WithContext(ctx).Should(Succeed())
			owner := map[string]string{}
			for _, p := range pods {
				Expect(owner).NotTo(HaveKey(p.Status.PodIP), "%s's Pods %s and %s/%s share an address", m, owner[p.Status.PodIP], p.Namespace, p.Name)
				owner[p.Status.PodIP] = p.Namespace + "/" + p.Name
			}
		}
		waitProbedReady(ctx, ns)
	}, NodeTimeout(3*time.Minute))

	It("reports each member's own results on its ServiceImport", func(ctx SpecContext) {
		want := map[string]string{
			c1: `[{"clusters":["` + c1 + `"]},{"clusters":["` + c1 + `","` + c2 + `"]}]`,
			c2: `[{"clusters":["` + c2 + `"]},{"clusters":["` + c1 + `","` + c2 + `"]}]`,
			c3: `[{"clusters":["` + c3 + `"]},{"clusters":["` + c3 + `"]}]`,
		}
		for m, results := range want {
			Eventually(func(g Gomega) {
				si := &mcsv1beta1.ServiceImport{}
				g.Expect(clients[m].Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, si)).To(Succeed())
				g.Expect(si.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationClusterSelectorResults, results))
				g.Expect(si.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationClusterSelectors, ownThenRegion))
			}).WithContext(ctx).Should(Succeed(), "in %s", m)
		}
	})

	It("keeps every member's traffic at home while its endpoints carry it", func(ctx SpecContext) {
		step(ctx, ns, steps[0], t)
	})

	It("spills c1's excess to its region, not beyond, when it keeps one endpoint", func(ctx SpecContext) {
		deletePods(ctx, c1, ns, "web-1", "web-2")
		step(ctx, ns, steps[1], t)
	})

	It("spills beyond the region once the region has no room", func(ctx SpecContext) {
		deletePods(ctx, c2, ns, "web-1", "web-2")
		step(ctx, ns, steps[2], t)
	})

	It("fails c1's clients over, past its full region, when its last endpoint is not ready", func(ctx SpecContext) {
		// Set as a kubelet would after a failed probe; the pod network's runtime writes readiness
		// only when its own probe's verdict changes, so the listener keeps running and only the
		// rules keep requests from it.
		Expect(localsettest.SetPodReady(ctx, clients[c1], ns, "web-0", false)).To(Succeed())
		step(ctx, ns, steps[3], t)
	})

	It("returns at once when c1's endpoint is ready again", func(ctx SpecContext) {
		Expect(localsettest.SetPodReady(ctx, clients[c1], ns, "web-0", true)).To(Succeed())
		step(ctx, ns, steps[4], t)
	})
})

// tierStep is one step of the e2e: each member's row (destination cluster -> share of its
// clients' traffic), and for some members the rows wrong answers would give instead, by what
// gives them, which TestCountedRequestsTellTiersApart shows the counted requests reject.
type tierStep struct {
	name  string
	want  map[string]map[string]float64
	wrong map[string]map[string]map[string]float64
}

// tierSteps are the rows of the five steps in the closed form, c1 and c2 in region-a and c3 in
// region-b, whose clients send equal thirds of the traffic (equal CPU), each level keeping what
// its endpoints carry at 1+t fair shares.
func tierSteps(c1, c2, c3 string, t float64) []tierStep {
	const kep = "the KEP's default (the first tier with a ready endpoint takes all)"
	const spread = "no locality (spread over every endpoint)"
	// 7 endpoints: c1's one carries (1+t)/7 of all traffic, its clients send a third; c2 has room
	// for the rest, and c3 as much, but c3 is in the other region.
	inRegion := (1 + t) * 3 / 7
	// 5 endpoints: c1 and c2 each keep (1+t)*3/5 of their own, region-a is full, the rest goes to c3.
	beyond := (1 + t) * 3 / 5
	// 4 endpoints: c2 keeps (1+t)*3/4 and is full; c1's clients find no room in the region.
	failover := (1 + t) * 3 / 4
	spillBeyond := map[string]map[string]float64{c1: {c1: beyond, c3: 1 - beyond}, c2: {c2: beyond, c3: 1 - beyond}, c3: {c3: 1}}
	return []tierStep{{
		name: "preference (3+3+3)",
		want: map[string]map[string]float64{c1: {c1: 1}, c2: {c2: 1}, c3: {c3: 1}},
		wrong: map[string]map[string]map[string]float64{
			c1: {spread: {c1: 1.0 / 3, c2: 1.0 / 3, c3: 1.0 / 3}},
		},
	}, {
		name: "spill in region (1+3+3)",
		want: map[string]map[string]float64{c1: {c1: inRegion, c2: 1 - inRegion}, c2: {c2: 1}, c3: {c3: 1}},
		wrong: map[string]map[string]map[string]float64{c1: {
			kep:                                  {c1: 1},
			"no region tier (spill over both)":   {c1: inRegion, c2: (1 - inRegion) / 2, c3: (1 - inRegion) / 2},
			"the spill sent to the other region": {c1: inRegion, c3: 1 - inRegion},
			spread:                               {c1: 1.0 / 7, c2: 3.0 / 7, c3: 3.0 / 7},
		}},
	}, {
		name: "spill beyond (1+1+3)",
		want: spillBeyond,
		wrong: map[string]map[string]map[string]float64{
			c1: {kep: {c1: 1}, "the spill kept in the full region": {c1: beyond, c2: 1 - beyond}, spread: {c1: 0.2, c2: 0.2, c3: 0.6}},
			c2: {kep: {c2: 1}, "the spill kept in the full region": {c2: beyond, c1: 1 - beyond}},
		},
	}, {
		name: "failover (0+1+3)",
		want: map[string]map[string]float64{c1: {c3: 1}, c2: {c2: failover, c3: 1 - failover}, c3: {c3: 1}},
		wrong: map[string]map[string]map[string]float64{
			c1: {kep: {c2: 1}, spread: {c2: 0.25, c3: 0.75}},
			c2: {kep: {c2: 1}, spread: {c2: 0.25, c3: 0.75}},
		},
	}, {
		name: "return (1+1+3)",
		want: spillBeyond,
		wrong: map[string]map[string]map[string]float64{
			c1: {kep: {c1: 1}, "still failed over": {c3: 1}},
		},
	}}
}

func deletePods(ctx SpecContext, member, ns string, pods ...string) {
	GinkgoHelper()
	for _, name := range pods {
		Expect(clients[member].Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
			client.GracePeriodSeconds(0))).To(Succeed())
	}
}

// step waits for the step's allocation (member -> destination -> share) in every member and in
// every dry-run agent's rules, then checks the endpoints' expected loads against the bound; with
// the real data path, it checks the row in what the real agents programmed and in counted
// requests.
func step(ctx SpecContext, ns string, s tierStep, t float64) {
	GinkgoHelper()
	name, want := s.name, s.want
	begin := time.Now()
	var published string
	Eventually(func(g Gomega) {
		var values []string
		for _, c := range clients {
			svc := &corev1.Service{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.DerivedServiceName(ns, "web")}, svc)).To(Succeed())
			values = append(values, svc.Annotations[allocation.Annotation])
		}
		for _, v := range values[1:] {
			g.Expect(v).To(Equal(values[0]), "the members disagree")
		}
		a, err := allocation.Parse(values[0])
		g.Expect(err).NotTo(HaveOccurred(), "published %q", values[0])
		for m, row := range want {
			g.Expect(rowOf(a, m)).To(sharesNear(row, 1e-6), "%s's row in %s", m, strings.TrimSpace(values[0]))
		}
		published = values[0]
	}).WithContext(ctx).Should(Succeed())
	GinkgoWriter.Printf("%s: allocation %s after %s\n", name, published, time.Since(begin).Round(100*time.Millisecond))
	for m, run := range agents {
		Eventually(func(g Gomega) {
			got := agentClusterShares(g, ctx, ns, run)
			g.Expect(got).To(sharesNear(want[m], 0.005), "%s's agent", run.node)
		}).WithContext(ctx).Should(Succeed(), "%s", run.p.Describe(20))
	}
	GinkgoWriter.Printf("%s: every agent's rules follow it after %s\n", name, time.Since(begin).Round(100*time.Millisecond))
	load := expectedLoad(ctx, ns)
	GinkgoWriter.Printf("%s: largest expected endpoint load %.3f of the fair share\n", name, load)
	Expect(load).To(BeNumerically("<=", 1+t+0.01), "over the %.0f%% bound", 100*t)
	if network == nil {
		GinkgoWriter.Printf("%s: %s\n", name, noNetwork)
		return
	}
	countRequests(ctx, ns, s)
	GinkgoWriter.Printf("%s: counted requests agree after %s\n", name, time.Since(begin).Round(100*time.Millisecond))
}

func rowOf(a allocation.Allocation, member string) map[string]float64 {
	row, ok := a.For(member)
	if !ok {
		return nil
	}
	out := map[string]float64{}
	if row.Local > 0 {
		out[member] = row.Local
	}
	for _, s := range row.Spill {
		out[s.To] += s.Share
	}
	return out
}

// sharesNear matches a map of shares with want within tol, with no extra destination.
func sharesNear(want map[string]float64, tol float64) OmegaMatcher {
	return WithTransform(func(got map[string]float64) error {
		for k, v := range got {
			if math.Abs(v-want[k]) > tol {
				return fmt.Errorf("sends %.4f to %s, want %.4f (all: %v)", v, k, want[k], got)
			}
		}
		for k, v := range want {
			if math.Abs(got[k]-v) > tol {
				return fmt.Errorf("sends %.4f to %s, want %.4f (all: %v)", got[k], k, v, got)
			}
		}
		return nil
	}, Succeed())
}

func agentClusterShares(g Gomega, ctx SpecContext, ns string, run agentRun) map[string]float64 {
	endpoints, err := localsettest.EndpointShares(run.ruleset, ns, names.DerivedServiceName(ns, "web"), "http")
	g.Expect(err).NotTo(HaveOccurred())
	clusterOf, err := localsettest.PodClusters(ctx, clients, ns)
	g.Expect(err).NotTo(HaveOccurred())
	return localsettest.ClusterShares(endpoints, clusterOf)
}

// expectedLoad is the largest expected load of one ready endpoint relative to the fair share,
// when each member's clients (equal CPU, a third each) split their traffic as its agent's rules do.
func expectedLoad(ctx SpecContext, ns string) float64 {
	GinkgoHelper()
	var worst float64
	Eventually(func(g Gomega) {
		ready := 0
		for _, c := range clients {
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			for i := range pods.Items {
				if localsettest.PodReady(&pods.Items[i]) {
					ready++
				}
			}
		}
		load := map[string]float64{}
		for _, run := range agents {
			endpoints, err := localsettest.EndpointShares(run.ruleset, ns, names.DerivedServiceName(ns, "web"), "http")
			g.Expect(err).NotTo(HaveOccurred())
			for addr, share := range endpoints {
				load[addr] += share / float64(len(agents))
			}
		}
		worst = 0
		for _, l := range load {
			worst = max(worst, l*float64(ready))
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return worst
}
