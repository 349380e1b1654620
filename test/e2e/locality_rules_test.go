package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/ops/statusview"
)

// agentRun is one dry-run agent process and the file it renders its ruleset to.
type agentRun struct {
	member, node, ruleset string
	p                     *localset.Process
}

// endpointWeights reads which endpoint addresses the agent's rules send a Service port's new
// connections to, with their weights (an endpoint of weight w fills w map elements).
func endpointWeights(path, ns, service, port string) (map[string]int, error) {
	ports, err := statusview.PortEndpoints(path)
	if err != nil {
		return nil, err
	}
	out := ports[ns+"/"+service+":"+port]
	if out == nil {
		out = map[string]int{}
	}
	return out, nil
}

// podClusters maps the address of every Pod of the namespace to its member.
func podClusters(ctx context.Context, g Gomega, clients map[string]client.Client, ns string) map[string]string {
	out := map[string]string{}
	for m, c := range clients {
		pods := &corev1.PodList{}
		g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		for _, p := range pods.Items {
			if p.Status.PodIP != "" {
				out[p.Status.PodIP] = m
			}
		}
	}
	return out
}

// endpointShares is the share of new connections each endpoint gets from one agent's rules for
// the derived Service of ns/web.
func (r agentRun) endpointShares(g Gomega, ns string) map[string]float64 {
	weights, err := endpointWeights(r.ruleset, ns, names.DerivedServiceName(ns, "web"), "http")
	g.Expect(err).NotTo(HaveOccurred(), "reading %s's ruleset", r.node)
	total := 0
	for _, w := range weights {
		total += w
	}
	out := map[string]float64{}
	for addr, w := range weights {
		out[addr] = float64(w) / float64(total)
	}
	return out
}

// shares sums an agent's endpoint shares by the endpoints' clusters.
func (r agentRun) shares(g Gomega, ctx context.Context, clients map[string]client.Client, ns string) map[string]float64 {
	clusterOf := podClusters(ctx, g, clients, ns)
	out := map[string]float64{}
	for addr, share := range r.endpointShares(g, ns) {
		cluster, ok := clusterOf[addr]
		if !ok {
			cluster = "unknown " + addr
		}
		out[cluster] += share
	}
	return out
}

// expectedLoads is the largest expected load of one ready endpoint, relative to its fair share
// (1/ready endpoints of the ClusterSet), when each member's clients send traffic in proportion
// to its Node CPU and split it as their agents' rules do (the mean over a member's agents).
func expectedLoads(ctx context.Context, agents map[string][]agentRun, clients map[string]client.Client, ns string) float64 {
	var worst float64
	Eventually(func(g Gomega) {
		cpu, total := map[string]float64{}, 0.0
		ready := 0
		for m, c := range clients {
			nodes := &corev1.NodeList{}
			g.Expect(c.List(ctx, nodes)).To(Succeed())
			for _, n := range nodes.Items {
				cpu[m] += float64(n.Status.Allocatable.Cpu().MilliValue())
			}
			total += cpu[m]
			pods := &corev1.PodList{}
			g.Expect(c.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			for _, p := range pods.Items {
				if podIsReady(&p) {
					ready++
				}
			}
		}
		g.Expect(ready).To(BeNumerically(">", 0))
		load := map[string]float64{}
		for m, runs := range agents {
			for _, r := range runs {
				for addr, share := range r.endpointShares(g, ns) {
					load[addr] += cpu[m] / total * share / float64(len(runs))
				}
			}
		}
		worst = 0
		for _, l := range load {
			worst = max(worst, l*float64(ready))
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return worst
}

func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.Status.PodIP != ""
		}
	}
	return false
}

// waitForPublished waits until every member publishes the same allocation on its derived
// Service of ns/web and ok accepts it.
func waitForPublished(ctx context.Context, clients map[string]client.Client, ns string, ok func(allocation.Allocation) bool) allocation.Allocation {
	var a allocation.Allocation
	Eventually(func(g Gomega) {
		var values []string
		for _, c := range clients {
			svc := &corev1.Service{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.DerivedServiceName(ns, "web")}, svc)).To(Succeed())
			values = append(values, svc.Annotations[allocation.Annotation])
		}
		g.Expect(values[0]).NotTo(BeEmpty(), "no allocation published")
		for _, v := range values[1:] {
			g.Expect(v).To(Equal(values[0]), "the members disagree")
		}
		var err error
		a, err = allocation.Parse(values[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok(a)).To(BeTrue(), "published: %s", strings.TrimSpace(values[0]))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return a
}
