package multicluster_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// Bad input to the multi-cluster controllers (issue 13): each is answered with a condition and
// an event, and a healthy export beside it keeps being imported without a single write.
var _ = Describe("bad input", func() {
	It("answers an export of a missing or ExternalName Service with Valid=False and an event, and follows the Service appearing and going", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		by := newBystander(ctx, ns, "steady")
		create(ctx, a, httpService(ns, "ext").Obj(), func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}
		})
		start := time.Now()
		export(ctx, a, ns, "ghost", nil)
		export(ctx, a, ns, "ext", nil)
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/NoService"))
		timeTo("missing Service: Valid=False/NoService", start)
		Eventually(conditionOf(ctx, a, ns, "ext", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/InvalidServiceType"))
		timeTo("ExternalName Service: Valid=False/InvalidServiceType", start)
		for _, name := range []string{"ghost", "ext"} {
			Eventually(conditionOf(ctx, a, ns, name, mcsv1beta1.ServiceExportConditionReady)).Should(Equal("False/Failed"))
			Expect(exportMessage(ctx, a, ns, name, mcsv1beta1.ServiceExportConditionValid)).NotTo(BeEmpty())
			Eventually(exportEvents).WithArguments(ctx, a, ns, name).Should(ContainElement(HavePrefix("Warning/ExportInvalid: ")))
			Expect(clusterSet.Broker.Client.Get(ctx, client.ObjectKey{Namespace: brokerNamespace, Name: names.RecordName("a", ns, name)},
				&v1alpha1.ServiceExportRecord{})).To(Satisfy(apierrors.IsNotFound), "nothing of %s reaches the broker", name)
		}
		GinkgoWriter.Printf("events: %q %q\n", exportEvents(ctx, a, ns, "ghost"), exportEvents(ctx, a, ns, "ext"))
		by.untouched(ctx)
		for _, m := range members {
			Expect(serviceImport(ctx, m, ns, "ghost")).To(BeNil())
			Expect(serviceImport(ctx, m, ns, "ext")).To(BeNil())
		}

		By("the missing Service appearing")
		start = time.Now()
		create(ctx, a, httpService(ns, "ghost").Obj())
		createSlice(ctx, a, ns, "ghost", "ghost-a", "10.98.0.1")
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("True/Valid"))
		Eventually(importedAddresses).WithArguments(ctx, b, ns, "ghost").Should(Equal([]string{"10.98.0.1"}))
		timeTo("Service created after its export: imported in b", start)
		by.untouched(ctx)

		By("the exported Service turned into an ExternalName one, and back")
		setType := func(t corev1.ServiceType) {
			Eventually(func() error {
				svc := &corev1.Service{}
				if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ghost"}, svc); err != nil {
					return err
				}
				svc.Spec.Type = t
				if t == corev1.ServiceTypeExternalName {
					svc.Spec.ExternalName, svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "example.com", "", nil
					svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy, svc.Spec.InternalTrafficPolicy = nil, nil, nil
				} else {
					svc.Spec.ExternalName = ""
				}
				return a.Client.Update(ctx, svc)
			}).Should(Succeed())
		}
		start = time.Now()
		setType(corev1.ServiceTypeExternalName)
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/InvalidServiceType"))
		for _, m := range members {
			Eventually(serviceImport).WithArguments(ctx, m, ns, "ghost").Should(BeNil(), "in %s", m.Name)
		}
		timeTo("exported Service turned ExternalName: import withdrawn everywhere", start)
		setType(corev1.ServiceTypeClusterIP)
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("True/Valid"))
		Eventually(importedAddresses).WithArguments(ctx, b, ns, "ghost").Should(Equal([]string{"10.98.0.1"}))
		by.untouched(ctx)

		By("the Service deleted while exported")
		start = time.Now()
		Expect(a.Client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"}})).To(Succeed())
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/NoService"))
		timeTo("exported Service deleted: Valid=False/NoService", start)
		for _, m := range members {
			Eventually(serviceImport).WithArguments(ctx, m, ns, "ghost").Should(BeNil(), "in %s", m.Name)
			Eventually(importedSlices).WithArguments(ctx, m, ns, "ghost").Should(BeEmpty(), "in %s", m.Name)
		}
		timeTo("exported Service deleted: import withdrawn everywhere", start)
		Eventually(exportEvents).WithArguments(ctx, a, ns, "ghost").Should(ContainElement(HavePrefix("Normal/ExportWithdrawn: ")))
		by.untouched(ctx)
	})

	It("exports and imports a Service with 100 ports and 10,000 endpoints", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		by := newBystander(ctx, ns, "steady")
		var slicePorts []discoveryv1.EndpointPort
		create(ctx, a, httpService(ns, "big").Obj(), func(s *corev1.Service) {
			s.Spec.Ports = nil
			for i := range 100 {
				name := fmt.Sprintf("p%d", i)
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Port: int32(1000 + i), Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(int32(2000 + i))})
				slicePorts = append(slicePorts, discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(int32(2000 + i)), Protocol: ptr.To(corev1.ProtocolTCP)})
			}
		})
		want := createSlices(ctx, a, ns, "big", 50, 10000, 100, slicePorts)
		start := time.Now()
		export(ctx, a, ns, "big", nil)
		for _, m := range []*member{b, c} {
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "big").WithTimeout(3*time.Minute).Should(Equal(want), "all 10,000 in %s", m.Name)
			timeTo("100 ports x 10,000 endpoints: all imported in "+m.Name, start)
			Eventually(func(g Gomega) {
				si := serviceImport(ctx, m, ns, "big")
				g.Expect(si.Spec.Ports).To(HaveLen(100))
				derived := derivedService(ctx, m, ns, "big")
				g.Expect(derived).NotTo(BeNil())
				g.Expect(derived.Spec.Ports).To(HaveLen(100))
			}).Should(Succeed(), "in %s", m.Name)
			imported := importedSlices(ctx, m, ns, "big")
			Expect(imported).To(HaveLen(100), "one imported slice per source slice")
			for _, s := range imported {
				Expect(len(s.Endpoints)).To(BeNumerically("<=", 100))
				Expect(s.Ports).To(HaveLen(100))
			}
		}
		Expect(conditionOf(ctx, a, ns, "big", mcsv1beta1.ServiceExportConditionReady)()).To(Equal("True/Exported"))
		by.untouched(ctx)
	})

	It("exports and imports names and label values at their maximum lengths", func(ctx SpecContext) {
		// A 63-character namespace and Service name, a 63-character exported label value, and a
		// local slice whose name is a 253-character subdomain with dots.
		ns := ("mcs-" + rand.String(6) + strings.Repeat("n", 63))[:63]
		svc := ("s" + rand.String(4) + strings.Repeat("x", 63))[:63]
		for _, m := range members {
			Expect(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		by := newBystander(ctx, ns, "steady")
		labelKey := "fleetslice.io/" + strings.Repeat("k", 63)
		labelValue := strings.Repeat("v", 63)
		longSlice := strings.Repeat(strings.Repeat("l", 62)+".", 5)[:253]
		create(ctx, a, httpService(ns, svc).Obj())
		Expect(a.Client.Create(ctx, newSlice(a, ns, svc, longSlice, "10.97.0.1"))).To(Succeed())
		Expect(a.Client.Create(ctx, newSlice(a, ns, svc, svc, "10.97.0.2"))).To(Succeed())
		export(ctx, a, ns, svc, func(e *mcsv1beta1.ServiceExport) {
			e.Spec.ExportedLabels = map[string]string{labelKey: labelValue}
		})
		for _, m := range []*member{b, c} {
			Eventually(importedAddresses).WithArguments(ctx, m, ns, svc).Should(Equal([]string{"10.97.0.1", "10.97.0.2"}), "in %s", m.Name)
			si := serviceImport(ctx, m, ns, svc)
			Expect(si.Labels).To(Equal(map[string]string{labelKey: labelValue}))
			Expect(derivedService(ctx, m, ns, svc)).NotTo(BeNil())
			for _, s := range importedSlices(ctx, m, ns, svc) {
				Expect(validation.IsDNS1123Label(s.Name)).To(BeEmpty(), "imported slice name %q", s.Name)
				Expect(s.Labels).To(HaveKeyWithValue(mcsv1beta1.LabelServiceName, svc))
				for k, v := range s.Labels {
					Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), "label %s=%q", k, v)
				}
			}
		}
		By("the broker holds the record under its readable name and both copies under a's id")
		record := &v1alpha1.ServiceExportRecord{}
		Expect(clusterSet.Broker.Client.Get(ctx, client.ObjectKey{Namespace: brokerNamespace, Name: "a." + ns + "." + svc}, record)).To(Succeed())
		copies := &discoveryv1.EndpointSliceList{}
		Expect(clusterSet.Broker.Client.List(ctx, copies, client.InNamespace(brokerNamespace), client.MatchingLabels(names.RecordLabels("a", ns, svc)))).To(Succeed())
		Expect(copies.Items).To(HaveLen(2))
		for _, s := range copies.Items {
			Expect(s.Name).To(HavePrefix("a."))
		}
		Expect(conditionOf(ctx, a, ns, svc, mcsv1beta1.ServiceExportConditionReady)()).To(Equal("True/Exported"))
		by.untouched(ctx)
	})

	It("refuses an export whose exportedLabels or exportedAnnotations no object could carry, and imports the valid exports without it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		by := newBystander(ctx, ns, "steady")
		// The mcs-api CRD takes any map; a ServiceImport's metadata does not.
		create(ctx, a, httpService(ns, "web").Obj())
		createSlice(ctx, a, ns, "web", "web-a", "10.94.1.1")
		start := time.Now()
		export(ctx, a, ns, "web", func(e *mcsv1beta1.ServiceExport) {
			e.Spec.ExportedLabels = map[string]string{"tier": strings.Repeat("v", 64)}
		})
		create(ctx, a, httpService(ns, "api").Obj())
		export(ctx, a, ns, "api", func(e *mcsv1beta1.ServiceExport) {
			e.Spec.ExportedAnnotations = map[string]string{"not a key": "x"}
		})
		Eventually(conditionOf(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/" + string(merge.ReasonInvalidExportedLabels)))
		timeTo("invalid exportedLabels: Valid=False/InvalidExportedLabels", start)
		Eventually(conditionOf(ctx, a, ns, "api", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/" + string(merge.ReasonInvalidExportedAnnotations)))
		Expect(exportMessage(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionValid)).To(ContainSubstring("tier"))
		Eventually(exportEvents).WithArguments(ctx, a, ns, "web").Should(ContainElement(HavePrefix("Warning/ExportInvalid: " + string(merge.ReasonInvalidExportedLabels))))
		GinkgoWriter.Printf("invalid labels: %s\n", exportMessage(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionValid))

		By("a valid export of the same Service from another cluster is imported, the invalid one takes no part")
		time.Sleep(1100 * time.Millisecond) // b's export is the newer: the invalid one would win every field
		create(ctx, b, httpService(ns, "web").Obj())
		createSlice(ctx, b, ns, "web", "web-b", "10.94.2.1")
		export(ctx, b, ns, "web", func(e *mcsv1beta1.ServiceExport) {
			e.Spec.ExportedLabels = map[string]string{"tier": "front"}
		})
		for _, m := range members {
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"10.94.2.1"}), "in %s", m.Name)
			Expect(serviceImport(ctx, m, ns, "web").Labels).To(Equal(map[string]string{"tier": "front"}))
			Expect(serviceImport(ctx, m, ns, "api")).To(BeNil())
		}
		Eventually(conditionOf(ctx, b, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("False/NoConflicts"))

		By("the labels corrected")
		Eventually(func() error {
			e := &mcsv1beta1.ServiceExport{}
			if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, e); err != nil {
				return err
			}
			e.Spec.ExportedLabels = map[string]string{"tier": "front"}
			return a.Client.Update(ctx, e)
		}).Should(Succeed())
		Eventually(conditionOf(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("True/Valid"))
		Eventually(importedAddresses).WithArguments(ctx, c, ns, "web").Should(Equal([]string{"10.94.1.1", "10.94.2.1"}))
		by.untouched(ctx)
	})

	It("flags a port clash in name or protocol on every export and keeps serving the oldest export's ports with every cluster's endpoints", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		by := newBystander(ctx, ns, "steady")
		withPort := func(p corev1.ServicePort) func(*corev1.Service) {
			return func(s *corev1.Service) { s.Spec.Ports = []corev1.ServicePort{p} }
		}
		udp53 := corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}
		create(ctx, a, httpService(ns, "dns").Obj(), withPort(udp53))
		createSlice(ctx, a, ns, "dns", "dns-a", "10.96.1.1")
		export(ctx, a, ns, "dns", nil)
		Eventually(importClusters).WithArguments(ctx, b, ns, "dns").Should(Equal([]string{"a"}))
		time.Sleep(1100 * time.Millisecond) // creationTimestamps have second resolution

		By("the same name and number with another protocol")
		tcp53 := udp53
		tcp53.Protocol = corev1.ProtocolTCP
		create(ctx, b, httpService(ns, "dns").Obj(), withPort(tcp53))
		createSlice(ctx, b, ns, "dns", "dns-b", "10.96.2.1")
		start := time.Now()
		export(ctx, b, ns, "dns", nil)
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "dns", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("True/PortConflict"), "on %s's export", m.Name)
			Eventually(exportEvents).WithArguments(ctx, m, ns, "dns").Should(ContainElement(HavePrefix("Warning/ExportConflict: PortConflict")), "on %s's export", m.Name)
		}
		timeTo("protocol clash: Conflict=True/PortConflict on both exports", start)
		GinkgoWriter.Printf("conflict on b: %s\n", exportMessage(ctx, b, ns, "dns", mcsv1beta1.ServiceExportConditionConflict))

		By("the same protocol and number under another name")
		time.Sleep(1100 * time.Millisecond)
		domain := udp53
		domain.Name = "domain"
		create(ctx, c, httpService(ns, "dns").Obj(), withPort(domain))
		createSlice(ctx, c, ns, "dns", "dns-c", "10.96.3.1")
		export(ctx, c, ns, "dns", nil)
		Eventually(conditionOf(ctx, c, ns, "dns", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("True/PortConflict"))

		oldest := mcsv1beta1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}
		for _, m := range members {
			Eventually(importClusters).WithArguments(ctx, m, ns, "dns").Should(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
			Eventually(func() []mcsv1beta1.ServicePort { return serviceImport(ctx, m, ns, "dns").Spec.Ports }).
				Should(Equal([]mcsv1beta1.ServicePort{oldest}), "the oldest export's port wins in %s", m.Name)
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "dns").Should(Equal([]string{"10.96.1.1", "10.96.2.1", "10.96.3.1"}),
				"every cluster's endpoints stay served in %s", m.Name)
		}
		by.untouched(ctx)

		By("the clash resolved")
		unexport(ctx, b, ns, "dns")
		unexport(ctx, c, ns, "dns")
		Eventually(conditionOf(ctx, a, ns, "dns", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("False/NoConflicts"))
		Eventually(exportEvents).WithArguments(ctx, a, ns, "dns").Should(ContainElement(HavePrefix("Normal/ConflictResolved: ")))
	})

	It("keeps an import of one unnamed port servable when a newer export adds named ports", func(ctx SpecContext) {
		// A Service of several ports must name each; a union of an unnamed port and named
		// ones made the derived Service's update fail, and the import stayed Ready=False.
		ns := newNamespace(ctx)
		by := newBystander(ctx, ns, "steady")
		create(ctx, a, httpService(ns, "web").Obj(), func(s *corev1.Service) { s.Spec.Ports[0].Name = "" })
		createSlice(ctx, a, ns, "web", "web-a", "10.93.1.1")
		export(ctx, a, ns, "web", nil)
		Eventually(importClusters).WithArguments(ctx, c, ns, "web").Should(Equal([]string{"a"}))
		time.Sleep(1100 * time.Millisecond)
		create(ctx, b, httpService(ns, "web").Obj(), func(s *corev1.Service) {
			s.Spec.Ports[0].Name = "http"
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)})
		})
		createSlice(ctx, b, ns, "web", "web-b", "10.93.2.1")
		export(ctx, b, ns, "web", nil)
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("True/PortConflict"), "on %s's export", m.Name)
		}
		unnamed := mcsv1beta1.ServicePort{Port: 80, Protocol: corev1.ProtocolTCP}
		for _, m := range members {
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"10.93.1.1", "10.93.2.1"}), "in %s", m.Name)
			Eventually(func(g Gomega) {
				si := serviceImport(ctx, m, ns, "web")
				g.Expect(si.Spec.Ports).To(Equal([]mcsv1beta1.ServicePort{unnamed}))
				g.Expect(conditionSummary(si.Status.Conditions, "Ready")).To(HavePrefix("True/"))
				derived := derivedService(ctx, m, ns, "web")
				g.Expect(derived).NotTo(BeNil())
				g.Expect(derived.Spec.Ports).To(HaveLen(1))
			}).Should(Succeed(), "in %s", m.Name)
		}
		by.untouched(ctx)
	})

	It("keeps a Headless import Headless when a newer export is a ClusterSetIP one, with TypeConflict and every endpoint", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		by := newBystander(ctx, ns, "steady")
		create(ctx, a, httpService(ns, "db").Obj(), func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
		createSlice(ctx, a, ns, "db", "db-a", "10.95.1.1")
		export(ctx, a, ns, "db", nil)
		Eventually(importClusters).WithArguments(ctx, b, ns, "db").Should(Equal([]string{"a"}))
		time.Sleep(1100 * time.Millisecond)
		create(ctx, b, httpService(ns, "db").Obj())
		createSlice(ctx, b, ns, "db", "db-b", "10.95.2.1")
		start := time.Now()
		export(ctx, b, ns, "db", nil)
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "db", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("True/TypeConflict"), "on %s's export", m.Name)
			Eventually(exportEvents).WithArguments(ctx, m, ns, "db").Should(ContainElement(HavePrefix("Warning/ExportConflict: TypeConflict")))
		}
		timeTo("type clash: Conflict=True/TypeConflict on both exports", start)
		for _, m := range members {
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "db").Should(Equal([]string{"10.95.1.1", "10.95.2.1"}), "in %s", m.Name)
			si := serviceImport(ctx, m, ns, "db")
			Expect(si.Spec.Type).To(Equal(mcsv1beta1.Headless), "the oldest export's type in %s", m.Name)
			Expect(si.Spec.IPs).To(BeEmpty())
			Expect(derivedService(ctx, m, ns, "db")).To(BeNil(), "a Headless import has no derived Service in %s", m.Name)
		}
		by.untouched(ctx)
	})
})
