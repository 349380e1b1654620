package datapath

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/ops/statusview"
)

// readmeExecCommand is the README's `kubectl exec` line that asks a clusterset.local name from
// a Pod: the command users are told answers after `make run`.
func readmeExecCommand() string {
	GinkgoHelper()
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if strings.HasPrefix(line, "kubectl ") && strings.Contains(line, " exec ") && strings.Contains(line, "svc.clusterset.local") {
			command, _, _ := strings.Cut(line, "#")
			return strings.TrimSpace(command)
		}
	}
	Fail("README.md has no `kubectl ... exec ... svc.clusterset.local` line")
	return ""
}

// kubectl runs a command line as a user would in a shell, with the ClusterSet's kubeconfig and
// the kubectl it was brought up with.
func kubectl(ctx context.Context, line string) (string, error) {
	bin, err := k8sbin.Dir(k8sbin.Kubectl)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+clusterSet.Kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

var _ = Describe("the samples of `make run`", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		manifests, err := localset.ReadManifests(filepath.Join("..", "..", "config", "samples"))
		Expect(err).NotTo(HaveOccurred())
		for _, m := range clusterSet.Members {
			Expect(localset.Apply(ctx, memberClient(m), manifests)).To(Succeed())
		}
	})

	It("answer the README's kubectl exec command with a web Pod naming its zone and Node", func(ctx SpecContext) {
		line := readmeExecCommand()
		Eventually(kubectl).WithContext(ctx).WithArguments(line).
			Should(MatchRegexp(`^web web-[a-z0-9]+-[a-z0-9]+ zone=zone-[abc] node=cluster-[12]-zone-[abc]-\d+$`), line)
	})

	It("keep each member's requests to the PreferSameCluster web tier within the allocation it publishes", func(ctx SpecContext) {
		for _, m := range clusterSet.Members {
			By("requests from " + m)
			imp := &mcsv1beta1.ServiceImport{}
			Eventually(func(g Gomega) {
				g.Expect(memberClient(m).Get(ctx, types.NamespacedName{Namespace: "demo", Name: "web"}, imp)).To(Succeed())
				g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
			}).WithContext(ctx).Should(Succeed())
			By("waiting until " + m + " imports every cluster's ready web endpoints and its agents send to them")
			Eventually(func(g Gomega) {
				var list discoveryv1.EndpointSliceList
				g.Expect(memberClient(m).List(ctx, &list, client.InNamespace("demo"),
					client.MatchingLabels{mcsv1beta1.LabelServiceName: "web"})).To(Succeed())
				ready := map[string]int{}
				for _, sl := range list.Items {
					for _, ep := range sl.Endpoints {
						if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
							ready[sl.Labels[mcsv1beta1.LabelSourceCluster]]++
						}
					}
				}
				g.Expect(ready).To(HaveLen(len(clusterSet.Members)))
				g.Expect(ready).To(HaveEach(12), "every web Pod of every member ready")
			}).WithContext(ctx).Should(Succeed())
			home := func(answers []string) int {
				n := 0
				for _, a := range answers {
					if strings.Contains(a, "node="+m+"-") {
						n++
					}
				}
				return n
			}
			// The allocation moves while endpoints become ready: read it once they are, and sample
			// until the agents follow it.
			var local float64
			Eventually(func(g Gomega) {
				local = homeShare(ctx, g, m, imp)
				sample := network.Ask(ctx, m, "demo", "client", imp.Spec.IPs[0], 80, 20)
				g.Expect(sample).NotTo(ContainElement(""))
				if local > 0 {
					g.Expect(home(sample)).To(BeNumerically(">", 0), "some requests stay home")
				}
				if local < 1 {
					g.Expect(home(sample)).To(BeNumerically("<", len(sample)), "some requests spill")
				}
			}).WithContext(ctx).Should(Succeed())

			const n = 200
			var answers []string
			Eventually(func() []string {
				answers = network.Ask(ctx, m, "demo", "client", imp.Spec.IPs[0], 80, n)
				return answers
			}).WithContext(ctx).ShouldNot(ContainElement(""), "every request is answered")
			kept := home(answers)
			Expect(homeShare(ctx, Default, m, imp)).To(Equal(local), "the allocation stayed put while measured")
			// Four binomial standard deviations: a fair share fails this about once in 15,000 runs.
			sigma := math.Sqrt(n * local * (1 - local))
			Expect(float64(kept)).To(BeNumerically("~", n*local, 4*sigma+1),
				"%s keeps %d of %d requests home; its allocation keeps %.1f%%", m, kept, n, 100*local)
			AddReportEntry(m+" observed", statusview.SummariseAnswers(answers, func(node string) string {
				for _, c := range clusterSet.Members {
					if strings.HasPrefix(node, c+"-") {
						return c
					}
				}
				return ""
			}))
		}
	})

	It("run kubectl exec with and without stdin and a TTY, and kubectl logs", func(ctx SpecContext) {
		context := "--context " + localset.Context(clusterSet.Members[0])
		for _, flags := range []string{"", "-i"} {
			By("kubectl exec " + flags)
			out, err := kubectl(ctx, "echo typed | kubectl "+context+" exec "+flags+" -n demo deploy/client -- sh -c 'cat; echo ran in $POD_NAMESPACE'")
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(HaveSuffix("ran in demo"))
			if flags == "-i" {
				Expect(out).To(HavePrefix("typed"), "stdin reaches the command with -i")
			}
		}
		// kubectl drops -t when its own input is no terminal, so ask for a TTY as any client may.
		pod := firstPod(ctx, clusterSet.Members[0], "demo", "client")
		for _, stdin := range []bool{false, true} {
			By(fmt.Sprintf("an exec with a TTY, stdin %v", stdin))
			out, err := execTTY(ctx, clusterSet.Members[0], "demo", pod, stdin, "sh", "-c", "test -t 1 && echo on a terminal")
			Expect(err).NotTo(HaveOccurred(), out)
			Expect(out).To(ContainSubstring("on a terminal"))
		}
		out, err := kubectl(ctx, "kubectl "+context+" exec -n demo deploy/client -- sh -c 'exit 3'")
		Expect(err).To(HaveOccurred())
		Expect(err.(*exec.ExitError).ExitCode()).To(Equal(3), out)

		By("the member's Pods still changing state after an exec with a TTY and no stdin (it crashed kwok's exec)")
		c := memberClient(clusterSet.Members[0])
		d := &appsv1.Deployment{}
		Expect(c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "client"}, d)).To(Succeed())
		before := d.DeepCopy()
		d.Spec.Replicas = ptr.To[int32](2)
		Expect(c.Patch(ctx, d, client.MergeFrom(before))).To(Succeed(), "a patch: the Deployment controller writes status meanwhile")
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "demo", Name: "client"}, d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(2))
		}).WithContext(ctx).Should(Succeed())

		out, err = kubectl(ctx, "kubectl "+context+" logs -n demo "+pod)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("client ready in demo"))
	})
})

func firstPod(ctx context.Context, member, ns, app string) string {
	GinkgoHelper()
	var names []string
	Eventually(func() []string { names = podNames(ctx, member, ns, app); return names }).ShouldNot(BeEmpty())
	return names[0]
}

// execTTY runs a command in a Pod through the API server with a TTY, as clients other than an
// interactive kubectl do, with or without stdin.
func execTTY(ctx context.Context, member, ns, pod string, stdin bool, argv ...string) (string, error) {
	cfg, err := clusterSet.RESTConfig(member)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: argv, Stdin: stdin, Stdout: true, TTY: true}, scheme.ParameterCodec)
	executor, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	opts := remotecommand.StreamOptions{Stdout: &out, Tty: true}
	if stdin {
		opts.Stdin = strings.NewReader("")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = executor.StreamWithContext(ctx, opts)
	return out.String(), err
}

// homeShare reads the share of its own traffic a member's published allocation keeps home.
func homeShare(ctx context.Context, g Gomega, member string, imp *mcsv1beta1.ServiceImport) float64 {
	svc := &corev1.Service{}
	g.Expect(memberClient(member).Get(ctx, types.NamespacedName{Namespace: imp.Namespace, Name: names.DerivedServiceName(imp.Namespace, imp.Name)}, svc)).To(Succeed())
	a, err := allocation.Parse(svc.Annotations[allocation.Annotation])
	g.Expect(err).NotTo(HaveOccurred())
	row := slices.IndexFunc(a.Clusters, func(c allocation.Cluster) bool { return c.Cluster == member })
	g.Expect(row).NotTo(BeNumerically("<", 0), "the allocation has a row for %s", member)
	return a.Clusters[row].Local
}
