package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/ops/statusview"
)

// resolveLimit is how soon after a ServiceImport appears its name must resolve (issue 12).
const resolveLimit = time.Second

var _ = Describe("clusterset.local DNS in the local ClusterSet", Ordered, func() {
	const ns = "dns-e2e"
	name := "web." + ns + ".svc.clusterset.local"
	var exporter, importer string

	BeforeAll(func(ctx SpecContext) {
		exporter, importer = clusterSet.Members[0], clusterSet.Members[1]
		if !clusterSet.DNS[importer].Exec {
			Skip("kwok cannot run exec'd commands with the member's DNS as resolver here (needs root and unshare)")
		}
		bin := GinkgoT().TempDir()
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/fleetslice/fleetslice/cmd/fleetslice-dns")
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "building fleetslice-dns: %s", out)
		for _, m := range clusterSet.Members {
			p, err := clusterSet.StartDNS(ctx, m, bin)
			if p != nil {
				DeferCleanup(func() { Expect(p.Stop(10 * time.Second)).To(Succeed()) })
			}
			Expect(err).NotTo(HaveOccurred())
		}
		for _, m := range clusterSet.Members {
			c, err := clusterSet.Client(m)
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		c, err := clusterSet.Client(importer)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
			Spec: corev1.PodSpec{
				NodeName:   clusterSet.AgentNodes(importer)[0],
				Containers: []corev1.Container{{Name: "client", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53"}},
			},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			pod := &corev1.Pod{}
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "client"}, pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, NodeTimeout(5*time.Minute))

	It("gives a Pod the member's DNS: cluster.local resolves, a name nobody exported does not", func(ctx SpecContext) {
		out, err := execInPod(ctx, importer, ns, "client", "getent", "hosts", "kubernetes.default.svc.cluster.local")
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(strings.Fields(out)).To(ContainElement("10.96.0.1"))
		out, err = execInPod(ctx, importer, ns, "client", "getent", "hosts", name)
		Expect(err).To(HaveOccurred(), "%s resolved before it was exported: %s", name, out)
	})

	It("resolves a Service exported by another member from a Pod, within a second of its ServiceImport appearing", func(ctx SpecContext) {
		// The Pod asks in a loop of its own from before the export, so kubectl's start-up is
		// not counted; it prints the time the name first resolved, on the host's clock.
		loop := exec.CommandContext(ctx, filepath.Join(k8sbinDir(), k8sbin.Kubectl), "--kubeconfig", clusterSet.Kubeconfig,
			"--context", localset.Context(importer), "exec", "-n", ns, "client", "--", "sh", "-c",
			`i=0; until getent hosts "$0"; do i=$((i+1)); [ $i -gt 6000 ] && exit 1; sleep 0.005; done; date +%s.%N`, name)
		stdout, err := loop.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		Expect(loop.Start()).To(Succeed())
		DeferCleanup(func() { _ = loop.Process.Kill(); _ = loop.Wait() })
		// Let the loop's first, failing, lookups run before anything is exported.
		time.Sleep(time.Second)

		ec, err := clusterSet.Client(exporter)
		Expect(err).NotTo(HaveOccurred())
		for _, obj := range []client.Object{
			&corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
			},
			&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
			},
			&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
		} {
			Expect(ec.Create(ctx, obj)).To(Succeed())
		}
		ic, err := clusterSet.Client(importer)
		Expect(err).NotTo(HaveOccurred())
		imp := &mcsv1beta1.ServiceImport{}
		var appeared time.Time
		Eventually(func() error {
			err := ic.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, imp)
			if err == nil && len(imp.Spec.IPs) > 0 {
				appeared = time.Now()
			}
			if err == nil && len(imp.Spec.IPs) == 0 {
				return apierrors.NewNotFound(mcsv1beta1.Resource("serviceimports"), "web (no IP yet)")
			}
			return err
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(5 * time.Millisecond).Should(Succeed())

		lines := make(chan []string, 1)
		go func() {
			var got []string
			for s := bufio.NewScanner(stdout); s.Scan(); {
				got = append(got, s.Text())
			}
			lines <- got
		}()
		var got []string
		Eventually(lines).WithTimeout(30 * time.Second).Should(Receive(&got))
		Expect(loop.Wait()).To(Succeed(), "the Pod's lookup loop: %q", got)
		Expect(got).To(HaveLen(2), "getent's answer and the time: %q", got)
		Expect(strings.Fields(got[0])).To(Equal([]string{imp.Spec.IPs[0], name}))
		secs, err := strconv.ParseFloat(got[1], 64)
		Expect(err).NotTo(HaveOccurred())
		resolved := time.Unix(0, int64(secs*1e9))
		took := resolved.Sub(appeared)
		GinkgoWriter.Printf("%s resolved in the Pod %s after its ServiceImport appeared in %s (seen by a poll every 5 ms)\n", name, took, importer)
		Expect(took).To(BeNumerically("<", resolveLimit))

		// And once more the way a user types it.
		out, err := execInPod(ctx, importer, ns, "client", "getent", "hosts", name)
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(strings.Fields(out)).To(ContainElement(imp.Spec.IPs[0]))
	})

	It("shows in the status view what each member's DNS answers for the import", func(ctx SpecContext) {
		for _, m := range clusterSet.Members {
			c, err := clusterSet.Client(m)
			Expect(err).NotTo(HaveOccurred())
			Eventually(func(g Gomega) {
				view := statusview.Collect(ctx, m, c)
				statusview.ResolveImports(ctx, &view, func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
					return localset.Resolve(ctx, clusterSet.DNS[m].Address, name, qtype)
				})
				var web *statusview.Import
				for i := range view.Imports {
					if view.Imports[i].Namespace == ns && view.Imports[i].Name == "web" {
						web = &view.Imports[i]
					}
				}
				g.Expect(web).NotTo(BeNil(), "%s has no ServiceImport %s/web", m, ns)
				g.Expect(web.DNSName()).To(Equal(name))
				g.Expect(web.Resolves).To(Equal(strings.Join(web.IPs, ",")), "in %s", m)
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		}
	})
})

// execInPod runs a command in a Pod with kubectl exec, as a user would.
func execInPod(ctx context.Context, member, ns, pod string, command ...string) (string, error) {
	args := append([]string{"--kubeconfig", clusterSet.Kubeconfig, "--context", localset.Context(member), "exec", "-n", ns, pod, "--"}, command...)
	out, err := exec.CommandContext(ctx, filepath.Join(k8sbinDir(), k8sbin.Kubectl), args...).CombinedOutput()
	return string(out), err
}

func k8sbinDir() string {
	dir, err := k8sbin.Dir(k8sbin.Kubectl)
	Expect(err).NotTo(HaveOccurred())
	return dir
}
