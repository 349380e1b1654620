package kubeproxy

import (
	"context"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
)

// echoScript answers every TCP connection on 8080 with the Pod's name, which the spec counts
// answers by.
const echoScript = `exec socat TCP-LISTEN:8080,fork,reuseaddr SYSTEM:'echo $POD_NAME'`

var _ = Describe("a member whose Nodes run kube-proxy and no agent", Ordered, func() {
	const ns = "beside"
	var importer, exporter string
	var clusterSetIP, localIP string

	BeforeAll(func(ctx SpecContext) {
		importer, exporter = clusterSet.Members[0], clusterSet.Members[1]
		Expect(network.Agents).To(BeEmpty(), "no Node may run the agent in this suite")
		Expect(network.KubeProxies).To(HaveLen(len(clusterSet.Members)), "every Node runs kube-proxy")
		for _, m := range clusterSet.Members {
			Expect(memberClient(m).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		// Exported by the exporter alone; the importer's own "local" is the in-cluster control.
		echo(ctx, exporter, ns, "echo", 2)
		Expect(memberClient(exporter).Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}})).To(Succeed())
		echo(ctx, importer, ns, "local", 2)
		Expect(memberClient(importer).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client", Labels: map[string]string{"app": "client"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "client", Image: "docker.io/library/busybox:1.37", Command: []string{"sleep", "infinity"},
			}}},
		})).To(Succeed())

		Eventually(func(g Gomega) {
			imp := &mcsv1beta1.ServiceImport{}
			g.Expect(memberClient(importer).Get(ctx, types.NamespacedName{Namespace: ns, Name: "echo"}, imp)).To(Succeed())
			g.Expect(imp.Spec.IPs).NotTo(BeEmpty())
			clusterSetIP = imp.Spec.IPs[0]
			svc := &corev1.Service{}
			g.Expect(memberClient(importer).Get(ctx, types.NamespacedName{Namespace: ns, Name: "local"}, svc)).To(Succeed())
			localIP = svc.Spec.ClusterIP
		}).WithContext(ctx).Should(Succeed())
	})

	It("sends requests to the ClusterSet IP of a Service only the other member exports to that member's Pods", func(ctx SpecContext) {
		remote := podNames(ctx, exporter, ns, "echo")
		Expect(remote).To(HaveLen(2))
		By("kube-proxy programming the ClusterSet IP on the client's Node")
		Eventually(kubeProxyRules).WithArguments(importer).Should(ContainSubstring(clusterSetIP), kubeProxyState)
		// The first answer waits for the imported slices, kube-proxy's sync and the listeners.
		Eventually(ask).WithContext(ctx).WithArguments(importer, clusterSetIP, 1).Should(
			WithTransform(keys, ConsistOf(BeElementOf(remote))))
		counts := ask(ctx, importer, clusterSetIP, 30)
		Expect(keys(counts)).To(ConsistOf(remote), "30 requests reach both remote Pods, and only them: %v", counts)
	})

	It("sends requests to a Service's own ClusterIP to the member's own Pods, as a control", func(ctx SpecContext) {
		local := podNames(ctx, importer, ns, "local")
		Expect(local).To(HaveLen(2))
		Eventually(ask).WithContext(ctx).WithArguments(importer, localIP, 1).Should(
			WithTransform(keys, ConsistOf(BeElementOf(local))))
		counts := ask(ctx, importer, localIP, 30)
		Expect(keys(counts)).To(ConsistOf(local), "30 requests reach both local Pods, and only them: %v", counts)
	})
})

func memberClient(member string) client.Client {
	GinkgoHelper()
	c, err := clusterSet.Client(member)
	Expect(err).NotTo(HaveOccurred())
	return c
}

// echo runs replicas Pods labelled app=name that answer with their name, behind a Service of
// the same name on port 80.
func echo(ctx context.Context, member, ns, name string, replicas int32) {
	GinkgoHelper()
	labels := map[string]string{"app": name}
	Expect(memberClient(member).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "echo", Image: "docker.io/alpine/socat:1.8.0.3", Command: []string{"sh", "-c", echoScript},
					Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
						FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					Ports: []corev1.ContainerPort{{Name: "tcp", ContainerPort: 8080}},
				}}},
			},
		},
	})).To(Succeed())
	Expect(memberClient(member).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	})).To(Succeed())
}

func podNames(ctx context.Context, member, ns, app string) []string {
	GinkgoHelper()
	names, err := localsettest.PodNames(ctx, memberClient(member), ns, app)
	Expect(err).NotTo(HaveOccurred())
	return names
}

// ask sends n TCP requests from the importer's client Pod to ip:80 and counts the answers by the
// Pod that gave them ("" counts requests nobody answered). Each is socat in the client Pod's
// namespace sending nothing: the echo server answers without reading, so a request it left
// unread would have its answer reset away.
func ask(ctx context.Context, member, ip string, n int) map[string]int {
	counts := map[string]int{}
	sb, ok := network.Runtimes[member].Sandbox("beside", "client")
	if !ok {
		counts[""] = n
		return counts
	}
	for range n {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, _ := exec.CommandContext(ctx, "ip", "netns", "exec", sb.Netns,
			"socat", "-t", "5", "-", "TCP:"+ip+":80,connect-timeout=2").Output()
		cancel()
		counts[strings.TrimSpace(string(out))]++
	}
	return counts
}

// kubeProxyState says whether each kube-proxy still runs, with the end of its log.
func kubeProxyState() string {
	var b strings.Builder
	for _, p := range network.KubeProxies {
		b.WriteString(p.Describe(20) + "\n")
	}
	return b.String()
}

func keys(counts map[string]int) []string { return slices.Sorted(maps.Keys(counts)) }

// kubeProxyRules lists the ruleset kube-proxy wrote on the member's Node.
func kubeProxyRules(member string) (string, error) {
	nodes := network.Network.Nodes(member)
	Expect(nodes).To(HaveLen(1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nodes[0].Netns, "nft", "list", "table", "ip", "kube-proxy").CombinedOutput()
	return string(out), err
}
