package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

var _ = Describe("EndpointSlices on a simulated cluster", func() {
	It("packs 300 Pods into at most 4 slices and stays compact through a rolling update", func(ctx SpecContext) {
		member := clusterSet.Members[0]
		c, err := clusterSet.Client(member)
		Expect(err).NotTo(HaveOccurred())
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-eps"}}
		Expect(c.Create(ctx, ns)).To(Succeed())
		deploy := spreadDeployment(ns.Name, "big", 300)
		deploy.Spec.Strategy = appsv1.DeploymentStrategy{
			Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge:       ptr.To(intstr.FromString("25%")),
				MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			},
		}
		Expect(c.Create(ctx, deploy)).To(Succeed())
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "big"},
			Spec: corev1.ServiceSpec{
				Selector: deploy.Spec.Selector.MatchLabels,
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			},
		}
		Expect(c.Create(ctx, svc)).To(Succeed())

		Eventually(func(g Gomega) {
			slices, ready, zones, dups := readyEndpoints(ctx, g, c, ns.Name, "big")
			g.Expect(dups).To(BeZero())
			g.Expect(ready).To(Equal(300))
			// Coalesced syncs add Pods in bursts, and a burst that does not fit a slice's
			// room gets a slice of its own rather than a second write: one slice of slack.
			g.Expect(slices).To(BeNumerically("<=", 4), "ceil(300/100) + compaction slack 1")
			g.Expect(zones).To(HaveLen(3))
		}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		By("rolling out a new template with maxSurge 25%")
		// A patch, not an update: the Deployment controller keeps writing status, and an update
		// from an older read would be refused with a conflict.
		Expect(c.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
		before := deploy.DeepCopy()
		deploy.Spec.Template.Annotations = map[string]string{"rollout": "2"}
		Expect(c.Patch(ctx, deploy, client.MergeFrom(before))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Status.UpdatedReplicas).To(Equal(int32(300)))
			g.Expect(deploy.Status.Replicas).To(Equal(int32(300)))
			slices, ready, _, dups := readyEndpoints(ctx, g, c, ns.Name, "big")
			g.Expect(dups).To(BeZero(), "no address listed twice once converged")
			g.Expect(ready).To(Equal(300))
			g.Expect(slices).To(BeNumerically("<=", 4), "ceil(300/100) + compaction slack 1")
		}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	})
})

// readyEndpoints returns the Service's slice count, its ready endpoints, the zones they are in,
// and how many addresses are listed more than once. That can happen for a moment when kwok gives
// a new Pod the IP of a Pod deleted just before, until the next sync drops the old endpoint.
func readyEndpoints(ctx SpecContext, g Gomega, c client.Client, ns, svc string) (slices, ready int, zones map[string]int, dups int) {
	list := &discoveryv1.EndpointSliceList{}
	g.Expect(c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
		discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: endpointslice.ManagedBy,
	})).To(Succeed())
	seen := map[string]bool{}
	zones = map[string]int{}
	for _, s := range list.Items {
		g.Expect(len(s.Endpoints)).To(BeNumerically("<=", 100))
		for _, ep := range s.Endpoints {
			if seen[ep.Addresses[0]] {
				dups++
			}
			seen[ep.Addresses[0]] = true
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ready++
				g.Expect(ep.Zone).NotTo(BeNil())
				zones[*ep.Zone]++
			}
		}
	}
	return len(list.Items), ready, zones, dups
}
