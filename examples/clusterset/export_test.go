package clusterset_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

// newService creates a ClusterIP Service selecting app=name, with the given port.
func newService(ctx SpecContext, m *clustersettest.Member, ns, name string, port corev1.ServicePort, annotations map[string]string) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{port},
		},
	}
	Expect(m.Client.Create(ctx, svc)).To(Succeed())
}

var http80 = corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}

// conflict summarises a ServiceExport's Conflict condition as "Status/Reason".
func conflict(ctx SpecContext, m *clustersettest.Member, ns, name string) func() string {
	return func() string {
		cond, err := m.ExportCondition(ctx, ns, name, mcsv1beta1.ServiceExportConditionConflict)
		if err != nil || cond == nil {
			return fmt.Sprintf("<none: %v>", err)
		}
		return string(cond.Status) + "/" + cond.Reason
	}
}

var _ = Describe("exporting a Service", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		var err error
		ns, err = clusterSet.CreateNamespace(ctx, "example-")
		Expect(err).NotTo(HaveOccurred())
	})

	It("imports it in another cluster with its ports, a ClusterSetIP and its ready endpoints", func(ctx SpecContext) {
		newService(ctx, east, ns, "web", http80, nil)
		var ips []string
		for i, zone := range []string{"zone-a", "zone-b"} {
			pod, err := east.CreatePod(ctx, ns, clustersettest.Pod{
				Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}, Zone: zone,
			})
			Expect(err).NotTo(HaveOccurred())
			ips = append(ips, pod.Status.PodIP)
		}
		Expect(east.Export(ctx, ns, "web")).To(Succeed())

		si, err := west.WaitForServiceImport(ctx, ns, "web")
		Expect(err).NotTo(HaveOccurred())
		Expect(si.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
		Expect(si.Spec.Ports).To(ConsistOf(mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}))
		Expect(si.Spec.IPs).NotTo(BeEmpty(), "the ClusterSetIP that clients in west dial")
		Expect(west.WaitForImportedAddresses(ctx, ns, "web", map[string][]string{"east": ips})).To(Succeed())

		By("withdrawing a Pod that stops being ready")
		Expect(east.SetPodReady(ctx, ns, "web-0", false)).To(Succeed())
		Expect(west.WaitForImportedAddresses(ctx, ns, "web", map[string][]string{"east": ips[1:]})).To(Succeed())
	})

	It("reports a port conflict on both exports and keeps the oldest export's port", func(ctx SpecContext) {
		newService(ctx, east, ns, "api", http80, nil)
		Expect(east.Export(ctx, ns, "api")).To(Succeed())
		_, err := west.WaitForServiceImport(ctx, ns, "api")
		Expect(err).NotTo(HaveOccurred())
		// The oldest export wins a clash; creation times have a one-second resolution.
		time.Sleep(1100 * time.Millisecond)

		other := http80
		other.Port = 8080
		newService(ctx, west, ns, "api", other, nil)
		Expect(west.Export(ctx, ns, "api")).To(Succeed())
		for _, m := range []*clustersettest.Member{east, west} {
			Eventually(conflict(ctx, m, ns, "api")).Should(Equal("True/PortConflict"), "on %s's export", m.Name)
		}
		Consistently(func(g Gomega) []mcsv1beta1.ServicePort {
			si := &mcsv1beta1.ServiceImport{}
			g.Expect(west.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, si)).To(Succeed())
			return si.Spec.Ports
		}).WithTimeout(time.Second).Should(ConsistOf(mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}))
	})

	It("gives each endpoint a hint for its own zone when three zones have equal CPU and Pods", func(ctx SpecContext) {
		newService(ctx, east, ns, "zonal", http80, map[string]string{"service.kubernetes.io/topology-mode": "Auto"})
		for i := range 9 {
			zone := []string{"zone-a", "zone-b", "zone-c"}[i%3]
			_, err := east.CreatePod(ctx, ns, clustersettest.Pod{
				Name: fmt.Sprintf("zonal-%d", i), Labels: map[string]string{"app": "zonal"}, Zone: zone,
			})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func(g Gomega) {
			hints, err := east.ServiceHints(ctx, ns, "zonal")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(hints).To(HaveLen(9))
			for _, h := range hints {
				g.Expect(h.ForZones).To(Equal([]string{h.Zone}), "endpoint %s", h.Address)
			}
		}).Should(Succeed())
	})
})
