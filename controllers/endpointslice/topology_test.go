package endpointslice_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

// topoNode names the Ready Node of a zone used by topology specs; the shared nodes of the other
// specs are not Ready and so never count for CPU shares.
func topoNode(zone string) string { return "topo-" + zone }

func setTopoNode(ctx SpecContext, zone, label string, cpu string, ready bool) {
	node := &corev1.Node{}
	err := k8sClient.Get(ctx, client.ObjectKey{Name: topoNode(zone)}, node)
	if client.IgnoreNotFound(err) != nil {
		Expect(err).NotTo(HaveOccurred())
	}
	if err != nil {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: topoNode(zone)}}
		Expect(k8sClient.Create(ctx, node)).To(Succeed())
	}
	node.Labels = map[string]string{corev1.LabelTopologyZone: label}
	Expect(k8sClient.Update(ctx, node)).To(Succeed())
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	Expect(k8sClient.Status().Update(ctx, node)).To(Succeed())
}

// hintsPerZone counts ready endpoints per hinted zone; unhinted ones count under "".
func hintsPerZone(ctx SpecContext, g Gomega, ns, svc string) map[string]int {
	out := map[string]int{}
	for _, s := range ourSlices(ctx, g, ns, svc) {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				continue
			}
			if ep.Hints == nil || len(ep.Hints.ForZones) == 0 {
				out[""]++
				continue
			}
			out[ep.Hints.ForZones[0].Name]++
		}
	}
	return out
}

func hintEvents(ctx SpecContext, g Gomega, ns, svc, reason string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == svc && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

var _ = Describe("topology hints", Ordered, func() {
	var ns string
	BeforeAll(func(ctx SpecContext) {
		for _, z := range zones {
			setTopoNode(ctx, z, z, "4", true)
		}
		ns = newNamespace(ctx)
		create(ctx, httpService(ns, "api").Annotation(endpointslice.AnnotationTopologyMode, "Auto").Obj())
		for i := range 9 {
			z := zones[i%3]
			createPod(ctx, ns, podSpec{name: fmt.Sprintf("api-%d", i), node: topoNode(z), ips: []string{fmt.Sprintf("10.20.0.%d", i+1)},
				labels: map[string]string{"app": "api"}, ready: true})
		}
	})

	It("hints every endpoint for its own zone when CPU is equal, and says so once", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			g.Expect(hintsPerZone(ctx, g, ns, "api")).To(Equal(map[string]int{"zone-a": 3, "zone-b": 3, "zone-c": 3}))
			for _, s := range ourSlices(ctx, g, ns, "api") {
				for _, ep := range s.Endpoints {
					g.Expect(ep.Hints.ForZones[0].Name).To(Equal(*ep.Zone))
				}
			}
			g.Expect(hintEvents(ctx, g, ns, "api", "TopologyAwareHintsEnabled")).To(HaveLen(1))
		}).Should(Succeed())
	})

	It("removes hints with a reason when a zone loses its only ready Node", func(ctx SpecContext) {
		setTopoNode(ctx, "zone-c", "zone-c", "4", false)
		Eventually(func(g Gomega) {
			g.Expect(hintsPerZone(ctx, g, ns, "api")).To(Equal(map[string]int{"": 9}))
			// Earlier Disabled events may exist from while the Pods were still coming up.
			var why []eventsv1.Event
			for _, e := range hintEvents(ctx, g, ns, "api", "TopologyAwareHintsDisabled") {
				if strings.Contains(e.Note, "EndpointInZoneWithoutNodes") {
					why = append(why, e)
				}
			}
			g.Expect(why).To(HaveLen(1))
			g.Expect(why[0].Type).To(Equal(corev1.EventTypeWarning))
		}).Should(Succeed())
		setTopoNode(ctx, "zone-c", "zone-c", "4", true)
		Eventually(func(g Gomega) {
			// The events API folds a repeat of the same event into a series, so the count of objects
			// stays 1; TestReportHintsEmitsOnStateChangesOnly checks each emission.
			g.Expect(hintsPerZone(ctx, g, ns, "api")).To(Equal(map[string]int{"zone-a": 3, "zone-b": 3, "zone-c": 3}))
		}).Should(Succeed())
	})

	It("donates endpoints to a zone whose CPU grew, only as many as the bound needs", func(ctx SpecContext) {
		// zone-a holds 64 of 72 CPUs: it needs ceil(64/72 * 9 / 1.25) = 7 endpoints.
		setTopoNode(ctx, "zone-a", "zone-a", "64", true)
		Eventually(func(g Gomega) {
			g.Expect(hintsPerZone(ctx, g, ns, "api")).To(Equal(map[string]int{"zone-a": 7, "zone-b": 1, "zone-c": 1}))
		}).Should(Succeed())
		setTopoNode(ctx, "zone-a", "zone-a", "4", true)
		Eventually(func(g Gomega) {
			g.Expect(hintsPerZone(ctx, g, ns, "api")).To(Equal(map[string]int{"zone-a": 3, "zone-b": 3, "zone-c": 3}))
		}).Should(Succeed())
	})

	It("follows a Node that changes zone", func(ctx SpecContext) {
		setTopoNode(ctx, "zone-c", "zone-b", "4", true)
		Eventually(func(g Gomega) {
			got := hintsPerZone(ctx, g, ns, "api")
			g.Expect(got).NotTo(HaveKey("zone-c"))
			g.Expect(got).NotTo(HaveKey(""))
			g.Expect(got["zone-a"] + got["zone-b"]).To(Equal(9))
			for _, s := range ourSlices(ctx, g, ns, "api") {
				for _, ep := range s.Endpoints {
					g.Expect(*ep.Zone).NotTo(Equal("zone-c"))
				}
			}
		}).Should(Succeed())
		setTopoNode(ctx, "zone-c", "zone-c", "4", true)
	})

	It("gives own-zone and own-node hints for trafficDistribution PreferSameNode", func(ctx SpecContext) {
		create(ctx, httpService(ns, "near").Obj(), func(s *corev1.Service) {
			s.Spec.Selector = map[string]string{"app": "api"}
			s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferSameNode)
		})
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "near")
			g.Expect(addressesOf(slices)).To(HaveLen(9))
			for _, s := range slices {
				for _, ep := range s.Endpoints {
					g.Expect(ep.Hints).NotTo(BeNil())
					g.Expect(ep.Hints.ForZones).To(Equal([]discoveryv1.ForZone{{Name: *ep.Zone}}))
					g.Expect(ep.Hints.ForNodes).To(Equal([]discoveryv1.ForNode{{Name: *ep.NodeName}}))
				}
			}
		}).Should(Succeed())
	})
})
