package endpointslice_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Bad input to the EndpointSlice controller (issue 13): Pods of several IPs and families, a
// Service whose families change, 100 ports, names and label values at their maximum lengths.
var _ = Describe("bad input", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		ensureNodes(ctx)
		ns = newNamespace(ctx)
	})

	// byFamily returns the Service's addresses per address type, sorted.
	byFamily := func(ctx SpecContext, g Gomega, name string) map[discoveryv1.AddressType][]string {
		out := map[discoveryv1.AddressType][]string{}
		for _, s := range ourSlices(ctx, g, ns, name) {
			g.Expect(len(s.Endpoints)).To(BeNumerically("<=", maxPerSlice), "slice %s over the cap", s.Name)
			out[s.AddressType] = append(out[s.AddressType], addressesOf([]discoveryv1.EndpointSlice{s})...)
			for _, ep := range s.Endpoints {
				g.Expect(ep.Addresses).To(HaveLen(1), "one address of the slice's family per endpoint")
			}
		}
		return out
	}

	It("gives an IPv6-only Service the IPv6 addresses of dual-stack Pods, and follows the Service's families as they change", func(ctx SpecContext) {
		svc := create(ctx, httpService(ns, "six").IPFamilies(corev1.IPv6Protocol).Obj())
		for i := range 3 {
			createPod(ctx, ns, podSpec{name: fmt.Sprintf("dual-%d", i), node: "node-zone-a", labels: map[string]string{"app": "six"}, ready: true,
				ips: []string{fmt.Sprintf("10.16.0.%d", i+1), fmt.Sprintf("fd00:16::%d", i+1)}})
		}
		createPod(ctx, ns, podSpec{name: "only-four", node: "node-zone-b", ips: []string{"10.16.1.1"}, labels: map[string]string{"app": "six"}, ready: true})
		createPod(ctx, ns, podSpec{name: "only-six", node: "node-zone-c", ips: []string{"fd00:16::1:1"}, labels: map[string]string{"app": "six"}, ready: true})
		Eventually(func(g Gomega) {
			g.Expect(byFamily(ctx, g, "six")).To(Equal(map[discoveryv1.AddressType][]string{
				discoveryv1.AddressTypeIPv6: {"fd00:16::1", "fd00:16::1:1", "fd00:16::2", "fd00:16::3"},
			}))
		}).Should(Succeed())

		By("the Service becoming dual-stack")
		Eventually(func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
			svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyPreferDualStack)
			svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
			return k8sClient.Update(ctx, svc)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(byFamily(ctx, g, "six")).To(Equal(map[discoveryv1.AddressType][]string{
				discoveryv1.AddressTypeIPv6: {"fd00:16::1", "fd00:16::1:1", "fd00:16::2", "fd00:16::3"},
				discoveryv1.AddressTypeIPv4: {"10.16.0.1", "10.16.0.2", "10.16.0.3", "10.16.1.1"},
			}))
		}).Should(Succeed())

		By("the Service going back to IPv6 only")
		Eventually(func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(svc), svc)).To(Succeed())
			svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
			svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
			svc.Spec.ClusterIPs = svc.Spec.ClusterIPs[:1]
			return k8sClient.Update(ctx, svc)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(byFamily(ctx, g, "six")).To(Equal(map[discoveryv1.AddressType][]string{
				discoveryv1.AddressTypeIPv6: {"fd00:16::1", "fd00:16::1:1", "fd00:16::2", "fd00:16::3"},
			}))
		}).Should(Succeed())
	})

	It("gives an IPv4 Service of IPv6-only Pods one placeholder slice, and fills it when a Pod gains an IPv4 address", func(ctx SpecContext) {
		create(ctx, httpService(ns, "four").Obj())
		createPod(ctx, ns, podSpec{name: "v6", node: "node-zone-a", ips: []string{"fd00:17::1"}, labels: map[string]string{"app": "four"}, ready: true})
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "four")
			g.Expect(slices).To(HaveLen(1))
			g.Expect(slices[0].AddressType).To(Equal(discoveryv1.AddressTypeIPv4))
			g.Expect(slices[0].Endpoints).To(BeEmpty())
		}).Should(Succeed())
		Consistently(func(g Gomega) { g.Expect(ourSlices(ctx, g, ns, "four")).To(HaveLen(1)) }).Should(Succeed())
		// A Pod's IPs are set once in reality; a new Pod shows the same change.
		createPod(ctx, ns, podSpec{name: "dual", node: "node-zone-a", ips: []string{"10.17.0.1", "fd00:17::2"}, labels: map[string]string{"app": "four"}, ready: true})
		Eventually(func(g Gomega) {
			g.Expect(byFamily(ctx, g, "four")).To(Equal(map[discoveryv1.AddressType][]string{discoveryv1.AddressTypeIPv4: {"10.17.0.1"}}))
			g.Expect(ourSlices(ctx, g, ns, "four")).To(HaveLen(1), "the placeholder is reused")
		}).Should(Succeed())
	})

	It("writes all 100 ports of a Service in every slice, under the cap", func(ctx SpecContext) {
		create(ctx, httpService(ns, "ports").Obj(), func(s *corev1.Service) {
			s.Spec.Ports = nil
			for i := range 100 {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i), TargetPort: intstr.FromInt32(int32(2000 + i))})
			}
		})
		createPods(ctx, ns, "ports", 18, 0, 12)
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, "ports")
			g.Expect(addressesOf(slices)).To(Equal(podIPs(18, 0, 12)))
			expectWellFormed(g, slices, 12)
			for _, s := range slices {
				g.Expect(s.Ports).To(HaveLen(100))
			}
		}).Should(Succeed())
	})

	It("names and labels the slices of a 63-character Service with 63-character label values", func(ctx SpecContext) {
		name := "l" + strings.Repeat("o", 61) + "g"
		value := strings.Repeat("v", 63)
		create(ctx, httpService(ns, name).Obj(), func(s *corev1.Service) {
			s.Labels = map[string]string{"fleetslice.io/" + strings.Repeat("k", 63): value}
		})
		createPods(ctx, ns, name, 19, 0, 7)
		Eventually(func(g Gomega) {
			slices := ourSlices(ctx, g, ns, name)
			g.Expect(addressesOf(slices)).To(Equal(podIPs(19, 0, 7)))
			for _, s := range slices {
				g.Expect(validation.IsDNS1123Subdomain(s.Name)).To(BeEmpty(), "slice name %q", s.Name)
				g.Expect(s.Labels).To(HaveKeyWithValue(discoveryv1.LabelServiceName, name))
				g.Expect(s.Labels).To(HaveKeyWithValue("fleetslice.io/"+strings.Repeat("k", 63), value))
			}
		}).Should(Succeed())
	})
})
