package install_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/ops/join"
)

const (
	demo         = "demo"
	podsPerZone  = 4
	fleetsliceMB = "endpointslice-controller.fleetslice.io"
)

var _ = Describe("fleetslice as installed", Ordered, func() {
	members := func() []*installedMember { return []*installedMember{fromYAML, fromChart} }

	BeforeAll(func(ctx context.Context) {
		for i, m := range members() {
			c := m.env.Client
			Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demo}})).To(Succeed())
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: demo,
					Annotations: map[string]string{"service.kubernetes.io/topology-mode": "Auto"}},
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": "web"},
					Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
				},
			}
			Expect(c.Create(ctx, svc)).To(Succeed())
			for z, zone := range zones {
				for p := range podsPerZone {
					createReadyPod(ctx, c, fmt.Sprintf("web-%d-%d", z, p), nodeName(zone), fmt.Sprintf("10.%d.%d.%d", 100+i, z, p+10))
				}
			}
		}
	})

	It("writes EndpointSlices owned by their Service, with zone hints, under the installed RBAC", func(ctx context.Context) {
		for _, m := range members() {
			Eventually(func(g Gomega) {
				slices := &discoveryv1.EndpointSliceList{}
				g.Expect(m.env.Client.List(ctx, slices, client.InNamespace(demo),
					client.MatchingLabels{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: fleetsliceMB})).To(Succeed())
				g.Expect(slices.Items).NotTo(BeEmpty())
				hinted := 0
				for _, s := range slices.Items {
					g.Expect(s.OwnerReferences).To(HaveLen(1))
					g.Expect(s.OwnerReferences[0].Kind).To(Equal("Service"))
					g.Expect(s.OwnerReferences[0].BlockOwnerDeletion).To(HaveValue(BeTrue()))
					for _, ep := range s.Endpoints {
						if ep.Hints != nil && len(ep.Hints.ForZones) == 1 {
							hinted++
						}
					}
				}
				g.Expect(hinted).To(Equal(len(zones)*podsPerZone), "every endpoint carries a zone hint")
			}).Should(Succeed(), "member %s; manager log:\n%s", m.id, m.manager.log.String())
		}
	})

	It("imports a ServiceExport of each member in the other", func(ctx context.Context) {
		for _, m := range members() {
			export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: demo}}
			Expect(m.env.Client.Create(ctx, export)).To(Succeed())
		}
		for _, m := range members() {
			Eventually(func(g Gomega) {
				si := &mcsv1beta1.ServiceImport{}
				g.Expect(m.env.Client.Get(ctx, client.ObjectKey{Namespace: demo, Name: "web"}, si)).To(Succeed())
				g.Expect(si.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
				g.Expect(si.Spec.IPs).NotTo(BeEmpty())
				clusters := []string{}
				for _, c := range si.Status.Clusters {
					clusters = append(clusters, c.Cluster)
				}
				g.Expect(clusters).To(ConsistOf("yaml", "chart"))
			}).Should(Succeed(), "member %s; manager log:\n%s", m.id, m.manager.log.String())
		}
	})

	It("has each agent program the imported Service's ClusterSet IP in its node's table", func(ctx context.Context) {
		for _, m := range members() {
			si := &mcsv1beta1.ServiceImport{}
			Expect(m.env.Client.Get(ctx, client.ObjectKey{Namespace: demo, Name: "web"}, si)).To(Succeed())
			Eventually(func(g Gomega) {
				table, err := m.ns.Command("", "nft", "list", "table", "ip", "fleetslice")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(table).To(ContainSubstring(si.Spec.IPs[0]))
			}).Should(Succeed(), "member %s; agent log:\n%s", m.id, m.agent.log.String())
		}
	})

	It("has each agent reach its API server at the address the install gave, the kubernetes Service's IP unreachable", func() {
		for _, m := range members() {
			var err error
			m.ns.Do(func() {
				var conn net.Conn
				if conn, err = net.DialTimeout("tcp", net.JoinHostPort(m.serviceIP, "443"), 2*time.Second); err == nil {
					conn.Close()
				}
			})
			Expect(err).To(HaveOccurred(), "the kubernetes Service's IP %s answers in the agent's namespace of %s", m.serviceIP, m.id)
			Expect(m.agent.log.String()).To(And(ContainSubstring(`"host":"`+strings.TrimSuffix(m.env.Config.Host, "/")+`"`), Not(ContainSubstring(m.serviceIP+":443"))),
				"agent of %s", m.id)
		}
	})

	It("has each agent take its cluster id from the ClusterProperty join wrote, with no --cluster-id", func() {
		for _, m := range members() {
			Eventually(m.agent.log.String).Should(And(
				ContainSubstring("cluster id from ClusterProperty cluster.clusterset.k8s.io"),
				ContainSubstring(`"clusterID":"`+m.id+`"`)), "agent of %s", m.id)
		}
	})

	It("was never refused a request", func() {
		for _, m := range members() {
			Expect(forbidden(m.manager.log.String())).To(BeEmpty(), "manager of %s", m.id)
			Expect(forbidden(m.agent.log.String())).To(BeEmpty(), "agent of %s", m.id)
		}
	})

	It("withdraws a member's endpoints from the others once it leaves", func(ctx context.Context) {
		Expect(join.Leave(ctx, join.Options{Broker: brokerEnv.Config, Member: fromChart.env.Config, ClusterID: fromChart.id})).To(Succeed())
		Eventually(func(g Gomega) {
			si := &mcsv1beta1.ServiceImport{}
			g.Expect(fromYAML.env.Client.Get(ctx, client.ObjectKey{Namespace: demo, Name: "web"}, si)).To(Succeed())
			g.Expect(si.Status.Clusters).To(ConsistOf(mcsv1beta1.ClusterStatus{Cluster: fromYAML.id}))
			imported := &discoveryv1.EndpointSliceList{}
			g.Expect(fromYAML.env.Client.List(ctx, imported, client.InNamespace(demo),
				client.MatchingLabels{mcsv1beta1.LabelSourceCluster: fromChart.id})).To(Succeed())
			g.Expect(imported.Items).To(BeEmpty())
		}).Should(Succeed(), "manager log:\n%s", fromYAML.manager.log.String())
	})
})

func createReadyPod(ctx context.Context, c client.Client, name, node, ip string) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "web", Image: "example.test/web:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
	Expect(c.Create(ctx, pod)).To(Succeed())
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	Expect(c.Status().Update(ctx, pod)).To(Succeed())
}
