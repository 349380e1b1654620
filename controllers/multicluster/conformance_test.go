package multicluster_test

import (
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

const upstreamManagedBy = "endpointslice-controller.k8s.io"

var _ = Describe("multi-cluster services conformance", func() {
	It("keeps a ServiceImport while at least one cluster exports, with imported slices from each", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, a, httpService(ns, "web").Obj())
		createSlice(ctx, a, ns, "web", "web-a1", "10.1.0.1", "10.1.0.2")
		create(ctx, b, httpService(ns, "web").Obj())
		createSlice(ctx, b, ns, "web", "web-b1", "10.2.0.1")

		export(ctx, a, ns, "web", nil)
		for _, m := range members {
			Eventually(importClusters).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a"}), "in %s", m.Name)
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"10.1.0.1", "10.1.0.2"}), "in %s", m.Name)
		}
		Eventually(conditionOf(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("True/Valid"))
		Eventually(conditionOf(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionReady)).Should(Equal("True/Exported"))
		Eventually(conditionOf(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("False/NoConflicts"))

		export(ctx, b, ns, "web", nil)
		for _, m := range members {
			Eventually(importClusters).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b"}), "in %s", m.Name)
			Eventually(importedFrom).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b"}), "in %s", m.Name)
		}
		By("labelling imported slices for multi-cluster consumers and never as the upstream controller's")
		si := serviceImport(ctx, c, ns, "web")
		Expect(si.Status.EndpointSliceObjects).To(Equal(mcsv1beta1.EndpointSliceObjectsPresent))
		derived := derivedService(ctx, c, ns, "web")
		Expect(derived).NotTo(BeNil())
		for _, s := range importedSlices(ctx, c, ns, "web") {
			Expect(s.Labels).To(HaveKeyWithValue(mcsv1beta1.LabelServiceName, "web"))
			Expect(s.Labels).To(HaveKey(mcsv1beta1.LabelSourceCluster))
			Expect(s.Labels).To(HaveKeyWithValue(discoveryv1.LabelServiceName, derived.Name))
			Expect(s.Labels[discoveryv1.LabelManagedBy]).To(And(Equal(sliceplan.ManagedBy), Not(Equal(upstreamManagedBy))))
			Expect(s.OwnerReferences).To(ConsistOf(HaveField("UID", si.UID)))
			for _, ep := range s.Endpoints {
				Expect(ep.Zone).NotTo(BeNil(), "zones are preserved")
				Expect(ep.Hints.ForZones).To(ConsistOf(discoveryv1.ForZone{Name: *ep.Zone}), "hints are preserved")
				Expect(ep.NodeName).To(BeNil(), "a remote cluster's node names mean nothing here")
			}
		}
		By("importing a cluster's own endpoints into its own ServiceImport, node names included")
		for _, s := range importedSlices(ctx, a, ns, "web") {
			if s.Labels[mcsv1beta1.LabelSourceCluster] == "a" {
				Expect(s.Endpoints[0].NodeName).NotTo(BeNil())
			}
		}

		By("keeping the import up to date when an exporter's endpoints change")
		slice := &discoveryv1.EndpointSlice{}
		Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-b1"}, slice)).To(Succeed())
		slice.Endpoints[0].Addresses = []string{"10.2.0.9"}
		Expect(b.Client.Update(ctx, slice)).To(Succeed())
		Eventually(importedAddresses).WithArguments(ctx, c, ns, "web").Should(ContainElement("10.2.0.9"))

		unexport(ctx, a, ns, "web")
		for _, m := range members {
			Eventually(importClusters).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"b"}), "in %s", m.Name)
			Eventually(importedFrom).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"b"}), "in %s", m.Name)
		}
		unexport(ctx, b, ns, "web")
		for _, m := range members {
			Eventually(serviceImport).WithArguments(ctx, m, ns, "web").Should(BeNil(), "in %s", m.Name)
			Eventually(importedSlices).WithArguments(ctx, m, ns, "web").Should(BeEmpty(), "in %s", m.Name)
			Eventually(derivedService).WithArguments(ctx, m, ns, "web").Should(BeNil(), "in %s", m.Name)
		}
	})

	It("gives a ClusterIP Service a ClusterSetIP import that matches its properties, with one IP per family", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		svc := create(ctx, a, httpService(ns, "api").Obj(), func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, AppProtocol: ptr.To("dns")},
			}
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
		})
		export(ctx, a, ns, "api", nil)
		for _, m := range members {
			Eventually(func(g Gomega) {
				si := serviceImport(ctx, m, ns, "api")
				g.Expect(si).NotTo(BeNil())
				g.Expect(si.Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
				g.Expect(si.Spec.IPs).To(HaveLen(len(svc.Spec.IPFamilies)), "one IP per family")
				for _, ip := range si.Spec.IPs {
					g.Expect(net.ParseIP(ip)).NotTo(BeNil())
				}
				g.Expect(si.Spec.IPFamilies).To(Equal(svc.Spec.IPFamilies))
				g.Expect(si.Spec.SessionAffinity).To(Equal(svc.Spec.SessionAffinity))
				g.Expect(si.Spec.SessionAffinityConfig).To(Equal(svc.Spec.SessionAffinityConfig))
				g.Expect(si.Spec.InternalTrafficPolicy).To(Equal(svc.Spec.InternalTrafficPolicy))
				g.Expect(si.Spec.TrafficDistribution).To(Equal(svc.Spec.TrafficDistribution))
				g.Expect(si.Spec.Ports).To(ConsistOf(
					mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
					mcsv1beta1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, AppProtocol: ptr.To("dns")},
				))
				g.Expect(conditionSummary(si.Status.Conditions, "Ready")).To(Equal("True/Ready"))

				derived := derivedService(ctx, m, ns, "api")
				g.Expect(derived).NotTo(BeNil())
				g.Expect(derived.Spec.ClusterIPs).To(Equal(si.Spec.IPs), "the derived Service's cluster IPs are the ClusterSetIPs")
				g.Expect(derived.OwnerReferences).To(BeEmpty(), "bound by name, so that deleting the ServiceImport cannot collect its ClusterSetIP")
				g.Expect(derived.Labels).To(HaveKeyWithValue(mcsv1beta1.LabelServiceName, "api"))
				g.Expect(derived.Spec.SessionAffinity).To(Equal(corev1.ServiceAffinityClientIP))
				g.Expect(derived.Spec.Selector).To(BeEmpty())
			}).Should(Succeed(), "in %s", m.Name)
		}

		By("bringing a deleted ServiceImport back with the same ClusterSetIP")
		before := serviceImport(ctx, b, ns, "api")
		derivedBefore := derivedService(ctx, b, ns, "api")
		Expect(b.Client.Delete(ctx, before)).To(Succeed())
		Eventually(func(g Gomega) {
			si := &mcsv1beta1.ServiceImport{}
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "api"}, si)).To(Succeed())
			g.Expect(si.UID).NotTo(Equal(before.UID))
			g.Expect(si.Spec.IPs).To(Equal(before.Spec.IPs))
			g.Expect(derivedService(ctx, b, ns, "api").UID).To(Equal(derivedBefore.UID))
		}).Should(Succeed())
	})

	It("propagates only exportedLabels and exportedAnnotations, and flags conflicting ones", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		for _, m := range []*member{a, b} {
			create(ctx, m, httpService(ns, "web").Obj(), func(s *corev1.Service) {
				s.Annotations = map[string]string{"service-only": "yes"}
			})
		}
		export(ctx, a, ns, "web", func(e *mcsv1beta1.ServiceExport) {
			e.Spec.ExportedLabels = map[string]string{"tier": "front"}
			e.Spec.ExportedAnnotations = map[string]string{"owner": "team-a"}
		})
		Eventually(func(g Gomega) {
			si := serviceImport(ctx, c, ns, "web")
			g.Expect(si).NotTo(BeNil())
			g.Expect(si.Labels).To(Equal(map[string]string{"tier": "front"}))
			g.Expect(si.Annotations).To(Equal(map[string]string{"owner": "team-a"}))
		}).Should(Succeed())

		time.Sleep(1100 * time.Millisecond) // creationTimestamps have second resolution: b's is newer
		export(ctx, b, ns, "web", func(e *mcsv1beta1.ServiceExport) {
			e.Spec.ExportedLabels = map[string]string{"tier": "back"}
			e.Spec.ExportedAnnotations = map[string]string{"owner": "team-b"}
		})
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).
				Should(Equal("True/LabelsConflict,AnnotationsConflict"), "on %s's export", m.Name)
		}
		Eventually(importClusters).WithArguments(ctx, c, ns, "web").Should(Equal([]string{"a", "b"}))
		si := serviceImport(ctx, c, ns, "web")
		Expect(si.Labels).To(Equal(map[string]string{"tier": "front"}), "the oldest export's labels win")
		Expect(si.Annotations).To(Equal(map[string]string{"owner": "team-a"}))

		By("clearing the conflict once the exports agree")
		Eventually(func() error {
			e := &mcsv1beta1.ServiceExport{}
			if err := b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, e); err != nil {
				return err
			}
			e.Spec.ExportedLabels = map[string]string{"tier": "front"}
			e.Spec.ExportedAnnotations = map[string]string{"owner": "team-a"}
			return b.Client.Update(ctx, e)
		}).Should(Succeed())
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("False/NoConflicts"))
		}
	})

	It("unites differing port sets with PortConflict and lets the oldest export win a port clash", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		importPorts := func() []mcsv1beta1.ServicePort {
			if si := serviceImport(ctx, c, ns, "web"); si != nil {
				return si.Spec.Ports
			}
			return nil
		}
		http80 := mcsv1beta1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}
		sctp142 := mcsv1beta1.ServicePort{Name: "sctp", Protocol: corev1.ProtocolSCTP, Port: 142}

		create(ctx, a, httpService(ns, "web").Obj())
		export(ctx, a, ns, "web", nil)
		Eventually(importClusters).WithArguments(ctx, b, ns, "web").Should(Equal([]string{"a"}))
		time.Sleep(1100 * time.Millisecond)
		create(ctx, b, httpService(ns, "web").Obj(), func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "sctp", Port: 142, Protocol: corev1.ProtocolSCTP})
		})
		export(ctx, b, ns, "web", nil)
		Eventually(importPorts).Should(ConsistOf(http80, sctp142), "the union of both port sets")
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).
				Should(Equal("True/PortConflict"), "on %s's export: the port sets differ", m.Name)
		}

		By("unexporting the cluster with the extra port")
		unexport(ctx, b, ns, "web")
		Eventually(importPorts).Should(ConsistOf(http80))
		Eventually(conditionOf(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("False/NoConflicts"))

		By("a port of the same name with another number")
		create(ctx, c, httpService(ns, "web").Obj(), func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 })
		export(ctx, c, ns, "web", nil)
		for _, m := range []*member{a, c} {
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).
				Should(Equal("True/PortConflict"), "on %s's export", m.Name)
		}
		Eventually(importClusters).WithArguments(ctx, a, ns, "web").Should(Equal([]string{"a", "c"}))
		Consistently(func() []mcsv1beta1.ServicePort { return serviceImport(ctx, a, ns, "web").Spec.Ports }).
			WithTimeout(time.Second).Should(ConsistOf(http80), "the oldest export's http port wins")
	})

	It("gives a headless Service a Headless import without IPs or derived Service", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, a, httpService(ns, "db").Obj(), func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
		createSlice(ctx, a, ns, "db", "db-a1", "10.1.1.1")
		export(ctx, a, ns, "db", nil)
		for _, m := range members {
			Eventually(func(g Gomega) {
				si := serviceImport(ctx, m, ns, "db")
				g.Expect(si).NotTo(BeNil())
				g.Expect(si.Spec.Type).To(Equal(mcsv1beta1.Headless))
				g.Expect(si.Spec.IPs).To(BeEmpty())
				g.Expect(importedSlices(ctx, m, ns, "db")).To(HaveLen(1))
			}).Should(Succeed(), "in %s", m.Name)
		}
		Consistently(func() []string { return serviceImport(ctx, b, ns, "db").Spec.IPs }).WithTimeout(2 * time.Second).Should(BeEmpty())
		Expect(derivedService(ctx, b, ns, "db")).To(BeNil())
		s := importedSlices(ctx, b, ns, "db")[0]
		Expect(s.Labels).NotTo(HaveKey(discoveryv1.LabelServiceName))
		Expect(s.Labels).To(HaveKey(sliceplan.LabelHeadless))
	})

	It("flags conflicting headlessness and keeps the oldest export's type", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, a, httpService(ns, "web").Obj())
		export(ctx, a, ns, "web", nil)
		Eventually(importClusters).WithArguments(ctx, b, ns, "web").Should(Equal([]string{"a"}))
		time.Sleep(1100 * time.Millisecond)
		create(ctx, b, httpService(ns, "web").Obj(), func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
		export(ctx, b, ns, "web", nil)
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).
				Should(Equal("True/TypeConflict"), "on %s's export", m.Name)
		}
		for _, m := range members {
			Eventually(importClusters).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b"}))
			Expect(serviceImport(ctx, m, ns, "web").Spec.Type).To(Equal(mcsv1beta1.ClusterSetIP))
		}
	})

	It("refuses to export an ExternalName Service or a missing one", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, a, httpService(ns, "ext").Obj(), func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}
		})
		export(ctx, a, ns, "ext", nil)
		export(ctx, a, ns, "ghost", nil)
		Eventually(conditionOf(ctx, a, ns, "ext", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/InvalidServiceType"))
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/NoService"))
		Eventually(conditionOf(ctx, a, ns, "ext", mcsv1beta1.ServiceExportConditionReady)).Should(Equal("False/Failed"))
		for _, m := range members {
			Consistently(serviceImport).WithArguments(ctx, m, ns, "ext").WithTimeout(2 * time.Second).Should(BeNil())
			Expect(serviceImport(ctx, m, ns, "ghost")).To(BeNil())
		}

		By("exporting once the missing Service appears, and withdrawing when it goes")
		create(ctx, a, httpService(ns, "ghost").Obj())
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("True/Valid"))
		Eventually(importClusters).WithArguments(ctx, b, ns, "ghost").Should(Equal([]string{"a"}))
		Expect(a.Client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"}})).To(Succeed())
		Eventually(conditionOf(ctx, a, ns, "ghost", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/NoService"))
		Eventually(serviceImport).WithArguments(ctx, b, ns, "ghost").Should(BeNil())
	})

	It("imports only where the namespace exists, and never creates it", func(ctx SpecContext) {
		ns := newNamespace(ctx, a, b)
		create(ctx, a, httpService(ns, "web").Obj())
		export(ctx, a, ns, "web", nil)
		Eventually(importClusters).WithArguments(ctx, b, ns, "web").Should(Equal([]string{"a"}))
		Consistently(func() error {
			return c.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		}).WithTimeout(2*time.Second).ShouldNot(Succeed(), "the namespace must not be created in c")

		Expect(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(importClusters).WithArguments(ctx, c, ns, "web").Should(Equal([]string{"a"}))
	})
})

// conditionSummary summarises a condition as "Status/Reason".
func conditionSummary(conds []metav1.Condition, t string) string {
	for _, c := range conds {
		if c.Type == t {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return "<none>"
}
