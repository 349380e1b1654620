package datapath

import (
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var _ = Describe("a Pod of one member reaching a Service exported from another", Ordered, func() {
	const ns = "datapath"
	var importer, exporter string
	var clusterSetIP string

	BeforeAll(func(ctx SpecContext) {
		importer, exporter = clusterSet.Members[0], clusterSet.Members[1]
		for _, m := range clusterSet.Members {
			createNamespace(ctx, m, ns)
		}
		echoDeployment(ctx, exporter, ns, "echo", 3)
		echoService(ctx, exporter, ns, "echo", tcpPort, udpPort)
		export(ctx, exporter, ns, "echo")
		echoDeployment(ctx, exporter, ns, "private", 1)
		echoService(ctx, exporter, ns, "private", tcpPort)
		// Exported from both members, but only the exporter's Service has the UDP port.
		echoDeployment(ctx, importer, ns, "split", 2)
		echoService(ctx, importer, ns, "split", tcpPort)
		export(ctx, importer, ns, "split")
		echoDeployment(ctx, exporter, ns, "split", 2)
		echoService(ctx, exporter, ns, "split", tcpPort, udpPort)
		export(ctx, exporter, ns, "split")
		clientPod(ctx, importer, ns, "client")

		Eventually(func(g Gomega) {
			imp := &mcsv1beta1.ServiceImport{}
			g.Expect(memberClient(importer).Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, imp)).To(Succeed())
			g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
			clusterSetIP = imp.Spec.IPs[0]
		}).WithContext(ctx).Should(Succeed())
	})

	It("answers by ClusterSet IP and by clusterset.local name, over TCP and UDP, from the exporter's Pods only", func(ctx SpecContext) {
		exporterPods := podNames(ctx, exporter, ns, "echo")
		Expect(exporterPods).To(HaveLen(3))
		for _, host := range []string{clusterSetIP, "echo." + ns + ".svc.clusterset.local"} {
			for _, p := range []servicePort{tcpPort, udpPort} {
				By(string(p.protocol) + " to " + host)
				// The first answer waits for the import, the agents' rules and the listeners.
				Eventually(request).WithArguments(importer, ns, "client", p, host).Should(BeElementOf(exporterPods))
				counts, err := answers(importer, ns, "client", p, host, 30)
				Expect(err).NotTo(HaveOccurred())
				Expect(slices.Collect(maps.Keys(counts))).To(HaveEach(BeElementOf(exporterPods)), "answered by %v", counts)
				Expect(counts).To(HaveLen(3), "30 requests reach every one of the 3 endpoints: %v", counts)
			}
		}
	})

	It("gives an unexported Service no clusterset.local name and no import", func(ctx SpecContext) {
		Consistently(func() error {
			return memberClient(importer).Get(ctx, types.NamespacedName{Namespace: ns, Name: "private"}, &mcsv1beta1.ServiceImport{})
		}).WithTimeout(3 * time.Second).Should(Satisfy(apierrors.IsNotFound))
		out, err := inPod(importer, ns, "client", "", "getent", "hosts", "private."+ns+".svc.clusterset.local")
		Expect(err).To(HaveOccurred(), "the name resolved: %s", out)
		_, err = request(importer, ns, "client", tcpPort, "private."+ns+".svc.clusterset.local")
		Expect(err).To(HaveOccurred())
	})

	It("sends a port only one exporter exposes to that exporter's Pods alone", func(ctx SpecContext) {
		host := "split." + ns + ".svc.clusterset.local"
		local, remote := podNames(ctx, importer, ns, "split"), podNames(ctx, exporter, ns, "split")
		Eventually(request).WithArguments(importer, ns, "client", udpPort, host).Should(BeElementOf(remote))
		udp, err := answers(importer, ns, "client", udpPort, host, 20)
		Expect(err).NotTo(HaveOccurred())
		Expect(slices.Collect(maps.Keys(udp))).To(HaveEach(BeElementOf(remote)), "UDP answered by %v", udp)

		By("the port both expose reaching both members' Pods")
		Eventually(answers).WithArguments(importer, ns, "client", tcpPort, host, 20).Should(
			And(HaveKey(BeElementOf(local)), HaveKey(BeElementOf(remote))))
	})
})
