package managed

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

const (
	ns      = "shop"
	movedNS = "moved"
	// Who writes slices: the manager binary and kube-controller-manager, by their user agents.
	fleetsliceAgent = "manager/"
	upstreamAgent   = "kube-controller-manager/"
)

var _ = Describe("a cluster whose kube-controller-manager keeps its EndpointSlice controller", Ordered, func() {
	// Pods per zone follow the zones' CPU (8, 4 and 2 per Node), so CPU-proportional hints can
	// keep every zone's traffic at home.
	var pods int

	BeforeAll(func(ctx SpecContext) {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var nodes corev1.NodeList
		Expect(k8s.List(ctx, &nodes)).To(Succeed())
		for _, node := range nodes.Items {
			cpus := int(node.Status.Allocatable.Cpu().Value())
			for i := range cpus {
				Expect(k8s.Create(ctx, webPod(ns, fmt.Sprintf("web-%s-%d", node.Name, i), node.Name))).To(Succeed())
				pods++
			}
		}
		Expect(pods).To(BeNumerically(">", 3))
		auto := map[string]string{endpointslice.AnnotationTopologyMode: "Auto"}
		opted := service(ns, "opted", nil)
		opted.Annotations = map[string]string{endpointslice.SelectorAnnotation: "app=web", endpointslice.AnnotationTopologyMode: "Auto"}
		plain := service(ns, "plain", map[string]string{"app": "web"})
		plain.Annotations = auto
		Expect(k8s.Create(ctx, opted)).To(Succeed())
		Expect(k8s.Create(ctx, plain)).To(Succeed())
	})

	It("gives an opted-in Service fleetslice's slices, with CPU-proportional hints", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			slices := slicesOf(ctx, g, ns, "opted")
			g.Expect(managers(slices)).To(ConsistOf(endpointslice.ManagedBy))
			g.Expect(readyEndpoints(slices)).To(HaveLen(pods))
			// Every endpoint hinted for one zone, and every zone served. Which endpoint serves
			// which zone is the allocator's (hysteresis may keep a zone's share on another
			// zone's endpoint after the Pods became ready one by one).
			zones, hinted := map[string]bool{}, map[string]bool{}
			for _, s := range slices {
				for _, ep := range s.Endpoints {
					zones[*ep.Zone] = true
					g.Expect(ep.Hints).NotTo(BeNil(), "endpoint %v has no hints", ep.Addresses)
					g.Expect(ep.Hints.ForZones).To(HaveLen(1), "endpoint %v", ep.Addresses)
					hinted[ep.Hints.ForZones[0].Name] = true
				}
			}
			g.Expect(hinted).To(Equal(zones))
		}).WithContext(ctx).Should(Succeed(), "%s", manager.Describe(20))
	})

	It("leaves every other Service to kube-controller-manager", func(ctx SpecContext) {
		Eventually(func(g Gomega) {
			slices := slicesOf(ctx, g, ns, "plain")
			g.Expect(managers(slices)).To(ConsistOf(endpointslice.UpstreamManagedBy))
			g.Expect(readyEndpoints(slices)).To(HaveLen(pods))
		}).WithContext(ctx).Should(Succeed())
	})

	It("keeps both controllers' slices apart as Pods come and go", func(ctx SpecContext) {
		var gone corev1.PodList
		Expect(k8s.List(ctx, &gone, client.InNamespace(ns), client.Limit(2))).To(Succeed())
		for i := range gone.Items {
			Expect(k8s.Delete(ctx, &gone.Items[i], client.GracePeriodSeconds(0))).To(Succeed())
		}
		for _, name := range []string{"opted", "plain"} {
			Eventually(func(g Gomega) {
				g.Expect(readyEndpoints(slicesOf(ctx, g, ns, name))).To(HaveLen(pods - len(gone.Items)))
			}).WithContext(ctx).Should(Succeed(), name)
		}
		Consistently(func(g Gomega) {
			g.Expect(managers(slicesOf(ctx, g, ns, "opted"))).To(ConsistOf(endpointslice.ManagedBy))
			g.Expect(managers(slicesOf(ctx, g, ns, "plain"))).To(ConsistOf(endpointslice.UpstreamManagedBy))
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
	})

	It("never has one slice written by both, as the API server's audit log shows", func(ctx SpecContext) {
		writers := sliceWriters(ns, 0)
		Expect(writers).NotTo(BeEmpty())
		for slice, agents := range writers {
			Expect(agents).To(HaveLen(1), "slice %s was written by %v", slice, agents)
			want := upstreamAgent
			if strings.HasPrefix(slice, "opted-") {
				want = fleetsliceAgent
			}
			for agent := range agents {
				Expect(agent).To(Equal(want), "slice %s", slice)
			}
		}
	})
})

var _ = Describe("opting in a Service kube-controller-manager has served", Ordered, func() {
	It("takes its slices over in place, and kube-controller-manager writes none of them again", func(ctx SpecContext) {
		const name = "switched"
		// A namespace of its own: the other container deletes Pods of its namespace.
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: movedNS}})).To(Succeed())
		for i := range 3 {
			p := webPod(movedNS, fmt.Sprintf("%s-%d", name, i), "")
			p.Labels = map[string]string{"app": name}
			Expect(k8s.Create(ctx, p)).To(Succeed())
		}
		svc := service(movedNS, name, map[string]string{"app": name})
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		var before []discoveryv1.EndpointSlice
		Eventually(func(g Gomega) {
			before = slicesOf(ctx, g, movedNS, name)
			g.Expect(managers(before)).To(ConsistOf(endpointslice.UpstreamManagedBy))
			g.Expect(readyEndpoints(before)).To(HaveLen(3))
		}).WithContext(ctx).Should(Succeed())

		switchedAt := auditSize()
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
		svc.Spec.Selector = nil
		svc.Annotations = map[string]string{endpointslice.SelectorAnnotation: "app=" + name}
		Expect(k8s.Update(ctx, svc)).To(Succeed())
		// As docs/operations.md says: kube-controller-manager's Endpoints controller leaves its
		// Endpoints object behind for a Service without spec.selector, and its mirroring
		// controller would copy it into slices beside fleetslice's until it is deleted.
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: movedNS, Name: name}}))).To(Succeed())
		Eventually(func(g Gomega) {
			after := slicesOf(ctx, g, movedNS, name)
			g.Expect(managers(after)).To(ConsistOf(endpointslice.ManagedBy))
			g.Expect(readyEndpoints(after)).To(HaveLen(3))
			g.Expect(uids(after)).To(ContainElements(uids(before)), "the slices are taken over in place, not replaced")
		}).WithContext(ctx).Should(Succeed(), "%s", manager.Describe(20))
		Consistently(func(g Gomega) {
			g.Expect(managers(slicesOf(ctx, g, movedNS, name))).To(ConsistOf(endpointslice.ManagedBy))
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
		writers := sliceWriters(movedNS, switchedAt)
		for _, slice := range before {
			Expect(writers[slice.Name]).NotTo(HaveKey(upstreamAgent), "kube-controller-manager wrote %s after the Service was opted in", slice.Name)
			Expect(writers[slice.Name]).To(HaveKey(fleetsliceAgent), "fleetslice took %s over without writing it", slice.Name)
		}
	})
})

func uids(slices []discoveryv1.EndpointSlice) []types.UID {
	out := make([]types.UID, len(slices))
	for i, s := range slices {
		out[i] = s.UID
	}
	return out
}

func auditSize() int64 {
	info, err := os.Stat(clusterSet.AuditLog(member))
	Expect(err).NotTo(HaveOccurred())
	return info.Size()
}

func webPod(namespace, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "web", Image: "registry.k8s.io/pause:3.10", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
}

func service(namespace, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{Selector: selector,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
}

func slicesOf(ctx SpecContext, g Gomega, namespace, svc string) []discoveryv1.EndpointSlice {
	var list discoveryv1.EndpointSliceList
	g.Expect(k8s.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc})).To(Succeed())
	return list.Items
}

func managers(slices []discoveryv1.EndpointSlice) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range slices {
		m := s.Labels[discoveryv1.LabelManagedBy]
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

func readyEndpoints(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	return out
}

// sliceWriters reads the member's audit log from byte from on: for every EndpointSlice of namespace written so
// far, the kinds of writer (by user agent prefix) that wrote it, whatever the verb. Creates are
// keyed "<service>-<created>": whoever created slices for a Service counts as writing them.
func sliceWriters(namespace string, from int64) map[string]map[string]bool {
	f, err := os.Open(clusterSet.AuditLog(member))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	_, err = f.Seek(from, io.SeekStart)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]map[string]bool{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Namespace, Name string
			} `json:"objectRef"`
			ResponseStatus *struct{ Code int } `json:"responseStatus"`
			// Creates of generated names name their slice only in the request (the audit
			// policy logs creates at the Request level).
			RequestObject *discoveryv1.EndpointSlice `json:"requestObject"`
		}
		Expect(json.Unmarshal(scanner.Bytes(), &ev)).To(Succeed())
		if ev.ObjectRef == nil || ev.ObjectRef.Namespace != namespace || ev.ResponseStatus == nil || ev.ResponseStatus.Code >= 300 {
			continue
		}
		name := ev.ObjectRef.Name
		if name == "" && ev.RequestObject != nil {
			// Created with a generated name: what it was created for is in its labels.
			name = ev.RequestObject.Labels[discoveryv1.LabelServiceName] + "-<created>"
		}
		Expect(name).NotTo(BeEmpty(), "a successful write names its slice: %s", scanner.Text())
		agent := "other: " + ev.UserAgent
		for _, known := range []string{fleetsliceAgent, upstreamAgent} {
			if strings.HasPrefix(ev.UserAgent, known) {
				agent = known
			}
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		out[name][agent] = true
	}
	Expect(scanner.Err()).NotTo(HaveOccurred())
	return out
}
