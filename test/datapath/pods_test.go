package datapath

import (
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("Pods the local runtime runs", Ordered, func() {
	const ns = "runtime"
	var member string

	BeforeAll(func(ctx SpecContext) {
		member = clusterSet.Members[0]
		createNamespace(ctx, member, ns)
	})

	pod := func(name string, policy corev1.RestartPolicy, script string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				RestartPolicy:                 policy,
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers:                    []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", script}}},
			},
		}
	}
	logOf := func(name string) string {
		raw, _ := os.ReadFile(network.Runtimes[member].LogPath(ns, name, "main"))
		return string(raw)
	}

	It("restart containers as restartPolicy says", func(ctx SpecContext) {
		c := memberClient(member)
		Expect(c.Create(ctx, pod("always", corev1.RestartPolicyAlways, "echo run; exit 0"))).To(Succeed())
		Expect(c.Create(ctx, pod("onfailure", corev1.RestartPolicyOnFailure, "echo run; exit 1"))).To(Succeed())
		Expect(c.Create(ctx, pod("never", corev1.RestartPolicyNever, "echo run; exit 1"))).To(Succeed())
		Eventually(func() int { return strings.Count(logOf("always"), "run\n") }).Should(BeNumerically(">=", 2))
		Eventually(func() int { return strings.Count(logOf("onfailure"), "run\n") }).Should(BeNumerically(">=", 2))
		Eventually(logOf).WithArguments("never").Should(Equal("run\n"))
		Consistently(logOf).WithArguments("never").WithTimeout(2 * time.Second).Should(Equal("run\n"))
		Eventually(func() []string { return eventReasons(ctx, member, ns, "onfailure") }).Should(ContainElement("BackOff"))
	})

	It("name a binary the host lacks in an event, and keep running the rest", func(ctx SpecContext) {
		c := memberClient(member)
		p := pod("missing", corev1.RestartPolicyAlways, "")
		p.Spec.Containers[0].Command = []string{"fleetslice-no-such-program"}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "other", Image: "busybox", Command: []string{"sleep", "600"}})
		Expect(c.Create(ctx, p)).To(Succeed())
		Eventually(func() []string { return eventMessages(ctx, member, ns, "missing") }).
			Should(ContainElement(ContainSubstring(`"fleetslice-no-such-program" is not installed on this host`)))
		Eventually(func() bool { _, ok := network.Runtimes[member].Sandbox(ns, "missing"); return ok }).Should(BeTrue())
	})

	It("stop a deleted Pod's processes and remove its namespace", func(ctx SpecContext) {
		c := memberClient(member)
		Expect(c.Create(ctx, pod("deleted", corev1.RestartPolicyAlways, "exec sleep 600"))).To(Succeed())
		var netnsName string
		Eventually(func() bool {
			sb, ok := network.Runtimes[member].Sandbox(ns, "deleted")
			if ok {
				netnsName = sb.Netns
			}
			return ok
		}).Should(BeTrue())
		Expect(c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deleted"}})).To(Succeed())
		Eventually(func() bool { _, err := os.Stat("/run/netns/" + netnsName); return os.IsNotExist(err) }).Should(BeTrue())
	})
})

func events(ctx SpecContext, member, ns, pod string) []corev1.Event {
	GinkgoHelper()
	var list corev1.EventList
	Expect(memberClient(member).List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == pod {
			out = append(out, e)
		}
	}
	return out
}

func eventReasons(ctx SpecContext, member, ns, pod string) []string {
	var out []string
	for _, e := range events(ctx, member, ns, pod) {
		out = append(out, e.Reason)
	}
	return out
}

func eventMessages(ctx SpecContext, member, ns, pod string) []string {
	var out []string
	for _, e := range events(ctx, member, ns, pod) {
		out = append(out, e.Message)
	}
	return out
}
