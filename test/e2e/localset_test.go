package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("the local ClusterSet", func() {
	It("has Ready Nodes in three zones with different CPU in every member", func(ctx SpecContext) {
		for _, member := range clusterSet.Members {
			c, err := clusterSet.Client(member)
			Expect(err).NotTo(HaveOccurred())
			Eventually(func(g Gomega) {
				nodes := &corev1.NodeList{}
				g.Expect(c.List(ctx, nodes)).To(Succeed())
				g.Expect(nodes.Items).To(HaveLen(9))
				cpuPerZone := map[string]int64{}
				for _, n := range nodes.Items {
					g.Expect(nodeReady(&n)).To(BeTrue(), "node %s ready", n.Name)
					cpuPerZone[n.Labels[corev1.LabelTopologyZone]] += n.Status.Allocatable.Cpu().MilliValue()
					g.Expect(n.Labels).To(HaveKey(corev1.LabelTopologyRegion))
				}
				g.Expect(cpuPerZone).To(HaveLen(3))
				distinct := map[int64]bool{}
				for _, cpu := range cpuPerZone {
					distinct[cpu] = true
				}
				g.Expect(distinct).To(HaveLen(3), "zones must differ in CPU: %v", cpuPerZone)
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		}
	})

	It("schedules a Deployment to Running Pods with IPs in all three zones of both members", func(ctx SpecContext) {
		for _, member := range clusterSet.Members {
			c, err := clusterSet.Client(member)
			Expect(err).NotTo(HaveOccurred())
			deploy := spreadDeployment("default", "harness", 9)
			Expect(c.Create(ctx, deploy)).To(Succeed())
			Eventually(func(g Gomega) {
				zones := runningPodZones(ctx, g, c, "default", deploy.Spec.Selector.MatchLabels)
				g.Expect(zones).To(HaveLen(3), "running pods per zone in %s: %v", member, zones)
				total := 0
				for _, n := range zones {
					total += n
				}
				g.Expect(total).To(Equal(9))
			}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		}
	})
})

// runningPodZones counts Running Pods with an IP per zone of their Node.
func runningPodZones(ctx SpecContext, g Gomega, c client.Client, ns string, selector map[string]string) map[string]int {
	pods := &corev1.PodList{}
	g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
	zones := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		node := &corev1.Node{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node)).To(Succeed())
		zones[node.Labels[corev1.LabelTopologyZone]]++
	}
	return zones
}

func spreadDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew:           1,
						TopologyKey:       corev1.LabelTopologyZone,
						WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector:     &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name:  name,
						Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					}},
				},
			},
		},
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
