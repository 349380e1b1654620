package endpointslice_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

var _ = Describe("EndpointSlice controller", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ensureNodes(ctx)
		ns = newNamespace(ctx)
	})

	It("creates size-capped slices with labels, owner and trigger time", func(ctx SpecContext) {
		createPods(ctx, ns, "web", 1, 0, 12)
		svc := create(ctx, httpService(ns, "web").Label("team", "blue").Obj())
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "web")
			g.Expect(addressesOf(slices)).To(Equal(podIPs(1, 0, 12)))
			g.Expect(slices).To(HaveLen(3))
			expectWellFormed(g, slices, 12)
			for _, s := range slices {
				g.Expect(s.GenerateName).To(Equal("web-"))
				g.Expect(s.Labels).To(HaveKeyWithValue("team", "blue"))
				g.Expect(s.Labels).NotTo(HaveKey(corev1.IsHeadlessService))
				g.Expect(s.Annotations).To(HaveKey(corev1.EndpointsLastChangeTriggerTime))
				g.Expect(s.OwnerReferences).To(HaveLen(1))
				g.Expect(s.OwnerReferences[0].UID).To(Equal(svc.UID))
				g.Expect(*s.OwnerReferences[0].Controller).To(BeTrue())
				g.Expect(s.Ports).To(Equal([]discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}))
				for _, ep := range s.Endpoints {
					g.Expect(*ep.Conditions.Ready).To(BeTrue())
					g.Expect(ep.Zone).NotTo(BeNil())
					g.Expect(ep.NodeName).NotTo(BeNil())
					g.Expect(ep.TargetRef.Kind).To(Equal("Pod"))
				}
			}
		}).Should(Succeed())

		By("mirroring a change of the Service's labels")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
		svc.Labels = map[string]string{"team": "green"}
		Expect(k8sClient.Update(ctx, svc)).To(Succeed())
		Eventually(func(g Gomega) {
			for _, s := range ourSlices(ctx, g, ns, "web") {
				g.Expect(s.Labels).To(HaveKeyWithValue("team", "green"))
			}
		}).Should(Succeed())
	})

	It("keeps every endpoint exactly once while scaling up and down", func(ctx SpecContext) {
		create(ctx, httpService(ns, "scale").Obj())
		createPods(ctx, ns, "scale", 2, 0, 7)
		Eventually(func(g Gomega) {
			g.Expect(addressesOf(ourSlices(ctx, g, ns, "scale"))).To(Equal(podIPs(2, 0, 7)))
		}).Should(Succeed())
		createPods(ctx, ns, "scale", 2, 7, 13)
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "scale")
			g.Expect(addressesOf(slices)).To(Equal(podIPs(2, 0, 20)))
			expectWellFormed(g, slices, 20)
		}).Should(Succeed())
		for i := 0; i < 16; i++ {
			deletePod(ctx, ns, fmt.Sprintf("scale-%d", i))
		}
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "scale")
			g.Expect(addressesOf(slices)).To(Equal(podIPs(2, 16, 4)))
			expectWellFormed(g, slices, 4)
		}).Should(Succeed())
	})

	It("converges a rolling update to a compact set of slices", func(ctx SpecContext) {
		create(ctx, httpService(ns, "roll").Obj())
		createPods(ctx, ns, "roll", 3, 0, 15)
		Eventually(func(g Gomega) {
			g.Expect(addressesOf(ourSlices(ctx, g, ns, "roll"))).To(HaveLen(15))
		}).Should(Succeed())
		// Replace Pods one by one, surge first, as a Deployment with maxUnavailable 0 does.
		for i := 0; i < 15; i++ {
			createPods(ctx, ns, "roll", 3, 100+i, 1)
			deletePod(ctx, ns, fmt.Sprintf("roll-%d", i))
		}
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "roll")
			g.Expect(addressesOf(slices)).To(Equal(podIPs(3, 100, 15)))
			expectWellFormed(g, slices, 15)
		}).Should(Succeed())
	})

	It("reflects readiness, terminating Pods and publishNotReadyAddresses", func(ctx SpecContext) {
		create(ctx, httpService(ns, "ready").Obj())
		create(ctx, httpService(ns, "publish").Obj(), func(s *corev1.Service) {
			s.Spec.Selector = map[string]string{"app": "ready"}
			s.Spec.PublishNotReadyAddresses = true
		})
		createPods(ctx, ns, "ready", 4, 0, 2)
		setReady(ctx, ns, "ready-0", false)
		Eventually(func(g Gomega) {
			ep := endpointByAddress(ourSlices(ctx, g, ns, "ready"), "10.4.0.1")
			g.Expect(ep).NotTo(BeNil())
			g.Expect(*ep.Conditions.Ready).To(BeFalse())
			g.Expect(*ep.Conditions.Serving).To(BeFalse())
			published := endpointByAddress(ourSlices(ctx, g, ns, "publish"), "10.4.0.1")
			g.Expect(published).NotTo(BeNil())
			g.Expect(*published.Conditions.Ready).To(BeTrue())
		}).Should(Succeed())

		By("keeping a terminating Pod as terminating, serving and not ready")
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ready-1"}, pod)).To(Succeed())
		pod.Finalizers = []string{"test.fleetslice.io/hold"}
		Expect(k8sClient.Update(ctx, pod)).To(Succeed())
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			ep := endpointByAddress(ourSlices(ctx, g, ns, "ready"), "10.4.0.2")
			g.Expect(ep).NotTo(BeNil())
			g.Expect(*ep.Conditions.Terminating).To(BeTrue())
			g.Expect(*ep.Conditions.Serving).To(BeTrue())
			g.Expect(*ep.Conditions.Ready).To(BeFalse())
		}).Should(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		pod.Finalizers = nil
		Expect(k8sClient.Update(ctx, pod)).To(Succeed())
		// With no kubelet in envtest, finish the graceful deletion as the kubelet would.
		deletePod(ctx, ns, "ready-1")
		Eventually(func(g Gomega) {
			g.Expect(endpointByAddress(ourSlices(ctx, g, ns, "ready"), "10.4.0.2")).To(BeNil())
		}).Should(Succeed())
	})

	It("drops Pods in a terminal phase and handles an IP reused by a new Pod", func(ctx SpecContext) {
		create(ctx, httpService(ns, "reuse").Obj())
		createPods(ctx, ns, "reuse", 5, 0, 2)
		Eventually(func(g Gomega) {
			g.Expect(addressesOf(ourSlices(ctx, g, ns, "reuse"))).To(HaveLen(2))
		}).Should(Succeed())
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reuse-1"}, pod)).To(Succeed())
		pod.Status.Phase = corev1.PodSucceeded
		Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
		deletePod(ctx, ns, "reuse-0")
		createPod(ctx, ns, podSpec{name: "newcomer", node: "node-zone-b", ips: []string{"10.5.0.1"},
			labels: map[string]string{"app": "reuse"}, ready: true})
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "reuse")
			g.Expect(addressesOf(slices)).To(Equal([]string{"10.5.0.1"}))
			ep := endpointByAddress(slices, "10.5.0.1")
			g.Expect(ep).NotTo(BeNil())
			g.Expect(ep.TargetRef.Name).To(Equal("newcomer"))
			g.Expect(*ep.Zone).To(Equal("zone-b"))
		}).Should(Succeed())
	})

	It("writes one slice set per address family for dual-stack Services", func(ctx SpecContext) {
		create(ctx, httpService(ns, "dual").Obj(), func(s *corev1.Service) {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		})
		for i := range 3 {
			createPod(ctx, ns, podSpec{name: fmt.Sprintf("dual-%d", i), node: "node-zone-a",
				ips: []string{fmt.Sprintf("10.6.0.%d", i+1), fmt.Sprintf("fd00:6::%d", i+1)}, labels: map[string]string{"app": "dual"}, ready: true})
		}
		Eventually(func(g Gomega) {
			byType := map[discoveryv1.AddressType][]string{}
			for _, s := range ourSlices(ctx, g, ns, "dual") {
				byType[s.AddressType] = append(byType[s.AddressType], addressesOf([]discoveryv1.EndpointSlice{s})...)
			}
			g.Expect(byType[discoveryv1.AddressTypeIPv4]).To(ConsistOf("10.6.0.1", "10.6.0.2", "10.6.0.3"))
			g.Expect(byType[discoveryv1.AddressTypeIPv6]).To(ConsistOf("fd00:6::1", "fd00:6::2", "fd00:6::3"))
		}).Should(Succeed())
	})

	It("resolves named ports per Pod, one slice set per port list", func(ctx SpecContext) {
		create(ctx, httpService(ns, "named").Obj())
		createPod(ctx, ns, podSpec{name: "v1", node: "node-zone-a", ips: []string{"10.7.0.1"}, labels: map[string]string{"app": "named"}, ready: true,
			ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}})
		createPod(ctx, ns, podSpec{name: "v2", node: "node-zone-b", ips: []string{"10.7.0.2"}, labels: map[string]string{"app": "named"}, ready: true,
			ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9090}}})
		createPod(ctx, ns, podSpec{name: "portless", node: "node-zone-c", ips: []string{"10.7.0.3"}, labels: map[string]string{"app": "named"}, ready: true,
			ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}})
		Eventually(func(g Gomega) {
			byPort := map[string][]string{}
			for _, s := range ourSlices(ctx, g, ns, "named") {
				key := "none"
				if len(s.Ports) > 0 {
					key = fmt.Sprint(*s.Ports[0].Port)
				}
				byPort[key] = append(byPort[key], addressesOf([]discoveryv1.EndpointSlice{s})...)
			}
			g.Expect(byPort).To(Equal(map[string][]string{"8080": {"10.7.0.1"}, "9090": {"10.7.0.2"}, "none": {"10.7.0.3"}}))
		}).Should(Succeed())
	})

	It("labels headless Services and sets hostnames only with a matching subdomain", func(ctx SpecContext) {
		create(ctx, httpService(ns, "db").Headless().Obj())
		createPod(ctx, ns, podSpec{name: "db-0", node: "node-zone-a", ips: []string{"10.8.0.1"}, labels: map[string]string{"app": "db"},
			ready: true, hostname: "db-0", subdomain: "db"})
		createPod(ctx, ns, podSpec{name: "db-1", node: "node-zone-a", ips: []string{"10.8.0.2"}, labels: map[string]string{"app": "db"},
			ready: true, hostname: "db-1", subdomain: "other"})
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "db")
			g.Expect(slices).NotTo(BeEmpty())
			for _, s := range slices {
				g.Expect(s.Labels).To(HaveKeyWithValue(corev1.IsHeadlessService, ""))
			}
			withSubdomain, otherSubdomain := endpointByAddress(slices, "10.8.0.1"), endpointByAddress(slices, "10.8.0.2")
			g.Expect(withSubdomain).NotTo(BeNil())
			g.Expect(otherSubdomain).NotTo(BeNil())
			g.Expect(withSubdomain.Hostname).To(Equal(ptr.To("db-0")))
			g.Expect(otherSubdomain.Hostname).To(BeNil())
		}).Should(Succeed())
	})

	It("keeps one placeholder slice for a Service without endpoints and skips ExternalName", func(ctx SpecContext) {
		create(ctx, httpService(ns, "empty").Obj())
		create(ctx, httpService(ns, "external").Obj(), func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
			s.Spec.Ports = nil
		})
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "empty")
			g.Expect(slices).To(HaveLen(1))
			g.Expect(slices[0].Endpoints).To(BeEmpty())
			g.Expect(slices[0].Ports).To(BeEmpty())
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(ourSlices(ctx, g, ns, "external")).To(BeEmpty())
			g.Expect(ourSlices(ctx, g, ns, "empty")).To(HaveLen(1))
		}).Should(Succeed())
	})

	It("leaves slices managed by someone else alone", func(ctx SpecContext) {
		foreign := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign", Labels: map[string]string{
				discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "someone-else"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.1"}}},
		}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		create(ctx, httpService(ns, "web").Obj())
		createPods(ctx, ns, "web", 9, 0, 3)
		Eventually(func(g Gomega) {
			g.Expect(addressesOf(ourSlices(ctx, g, ns, "web"))).To(Equal(podIPs(9, 0, 3)))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			got := &discoveryv1.EndpointSlice{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
			g.Expect(got.Generation).To(Equal(foreign.Generation))
			g.Expect(got.Labels[discoveryv1.LabelManagedBy]).To(Equal("someone-else"))
		}).Should(Succeed())
	})

	It("does not recreate slices while the Service is being deleted", func(ctx SpecContext) {
		svc := create(ctx, httpService(ns, "bye").Obj(), func(s *corev1.Service) { s.Finalizers = []string{"test.fleetslice.io/hold"} })
		createPods(ctx, ns, "bye", 10, 0, 2)
		Eventually(func(g Gomega) { g.Expect(ourSlices(ctx, g, ns, "bye")).To(HaveLen(1)) }).Should(Succeed())
		Expect(k8sClient.Delete(ctx, svc)).To(Succeed())
		// envtest runs no garbage collector: remove the slices as it would.
		Expect(k8sClient.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, client.InNamespace(ns),
			client.MatchingLabels{discoveryv1.LabelServiceName: "bye"})).To(Succeed())
		createPods(ctx, ns, "bye", 10, 2, 1)
		Consistently(func(g Gomega) { g.Expect(ourSlices(ctx, g, ns, "bye")).To(BeEmpty()) }, 2*time.Second).Should(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
		svc.Finalizers = nil
		Expect(k8sClient.Update(ctx, svc)).To(Succeed())
	})

	It("adopts slices of the upstream controller in place, never listing an endpoint twice", func(ctx SpecContext) {
		createPods(ctx, ns, "adopt", 11, 0, 3)
		pods := &corev1.PodList{}
		Expect(k8sClient.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		upstream := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "adopt-", Labels: map[string]string{
				discoveryv1.LabelServiceName: "adopt", discoveryv1.LabelManagedBy: endpointslice.UpstreamManagedBy}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		for _, p := range pods.Items {
			upstream.Endpoints = append(upstream.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{p.Status.PodIP},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
				NodeName:   ptr.To(p.Spec.NodeName),
				Zone:       ptr.To("stale-zone"),
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID},
			})
		}
		Expect(k8sClient.Create(ctx, upstream)).To(Succeed())
		create(ctx, httpService(ns, "adopt").Obj())
		Eventually(func(g Gomega) {
			all := &discoveryv1.EndpointSliceList{}
			g.Expect(k8sClient.List(ctx, all, client.InNamespace(ns))).To(Succeed())
			g.Expect(all.Items).To(HaveLen(1), "adoption must not create a second slice")
			s := all.Items[0]
			g.Expect(s.UID).To(Equal(upstream.UID))
			g.Expect(s.Labels[discoveryv1.LabelManagedBy]).To(Equal(endpointslice.ManagedBy))
			g.Expect(addressesOf(all.Items)).To(Equal(podIPs(11, 0, 3)))
			g.Expect(*s.Endpoints[0].Zone).NotTo(Equal("stale-zone"))
			g.Expect(s.OwnerReferences).To(HaveLen(1))
		}).Should(Succeed())
	})
})
