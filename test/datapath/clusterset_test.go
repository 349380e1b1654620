package datapath

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
				// Wait for every endpoint to answer: the import, the agents' rules and the three
				// listeners come one by one (each Pod is an endpoint once its readiness probe
				// passes), and a first answer alone may come while only one is in.
				Eventually(answers).WithArguments(importer, ns, "client", p, host, 30).Should(HaveLen(3))
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

var _ = Describe("a member whose Pods go not ready", Ordered, func() {
	const ns = "failover"
	var home, other string
	var flags string

	// Each member's Pods are ready while the file $FLAG is missing: creating it fails their
	// readiness probe, as a stopped listener would.
	flagged := func(member string) func(*corev1.Container) {
		return func(c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "FLAG", Value: filepath.Join(flags, member)})
			c.ReadinessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", `test ! -e "$FLAG"`}}},
				PeriodSeconds: 1, FailureThreshold: 1,
			}
		}
	}

	BeforeAll(func(ctx SpecContext) {
		home, other = clusterSet.Members[0], clusterSet.Members[1]
		flags = GinkgoT().TempDir()
		for _, m := range clusterSet.Members {
			createNamespace(ctx, m, ns)
			echoDeploymentWith(ctx, m, ns, "echo", 2, flagged(m))
			echoService(ctx, m, ns, "echo", tcpPort)
			export(ctx, m, ns, "echo", "fleetslice.io/traffic-distribution", "PreferSameCluster")
		}
		clientPod(ctx, home, ns, "client")
	})

	It("fails over to the other member and comes back", func(ctx SpecContext) {
		host := "echo." + ns + ".svc.clusterset.local"
		homePods, otherPods := podNames(ctx, home, ns, "echo"), podNames(ctx, other, ns, "echo")
		all := func(pods []string) gomegatypes.GomegaMatcher {
			return WithTransform(func(counts map[string]int) []string { return slices.Collect(maps.Keys(counts)) }, HaveEach(BeElementOf(pods)))
		}
		By("keeping " + home + "'s requests home while its Pods are ready")
		Eventually(answers).WithArguments(home, ns, "client", tcpPort, host, 10).Should(all(homePods))

		By("sending them to " + other + " once " + home + "'s Pods fail their probe")
		Expect(os.WriteFile(filepath.Join(flags, home), nil, 0o644)).To(Succeed())
		Eventually(answers).WithArguments(home, ns, "client", tcpPort, host, 10).Should(all(otherPods))

		By("bringing them home when the Pods are ready again")
		Expect(os.Remove(filepath.Join(flags, home))).To(Succeed())
		Eventually(answers).WithArguments(home, ns, "client", tcpPort, host, 10).Should(all(homePods))
	})
})

var _ = Describe("a headless Service exported from another member", Ordered, func() {
	const ns = "headless"
	var importer, exporter string

	BeforeAll(func(ctx SpecContext) {
		importer, exporter = clusterSet.Members[0], clusterSet.Members[1]
		for _, m := range clusterSet.Members {
			createNamespace(ctx, m, ns)
		}
		for _, name := range []string{"db-0", "db-1"} {
			echoPod(ctx, exporter, ns, name, map[string]string{"app": "db"}, func(p *corev1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain = name, "db"
			})
		}
		Expect(memberClient(exporter).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"},
				Ports: []corev1.ServicePort{{Name: "tcp", Port: 8080}}},
		})).To(Succeed())
		export(ctx, exporter, ns, "db")
		clientPod(ctx, importer, ns, "client")
	})

	It("reaches each Pod by its per-endpoint name", func(ctx SpecContext) {
		for _, name := range []string{"db-0", "db-1"} {
			host := name + "." + exporter + ".db." + ns + ".svc.clusterset.local"
			direct := servicePort{"tcp", corev1.ProtocolTCP, 8080}
			Eventually(request).WithArguments(importer, ns, "client", direct, host).Should(Equal(name), host)
		}
		By("and each Pod's address resolving back to that name (spec 2.4.3)")
		for _, name := range []string{"db-0", "db-1"} {
			p := &corev1.Pod{}
			Expect(memberClient(exporter).Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, p)).To(Succeed())
			Eventually(inPod).WithArguments(importer, ns, "client", "", "getent", "hosts", p.Status.PodIP).
				Should(ContainSubstring(name + "." + exporter + ".db." + ns + ".svc.clusterset.local"))
		}
	})
})
