package multicluster_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
)

const (
	// ownCluster selects the importer itself; every member has its id, so nothing is missing.
	ownCluster = `[{"propertySelector":{"matchExpressions":[{"key":"cluster.clusterset.k8s.io","operator":"In","values":["@SameAsImporter@"]}]}}]`
	// sameRegion compares a property no member of this suite has.
	sameRegion = `[{"propertySelector":{"matchProperties":{"region.topology.k8s.io":"@SameAsImporter@"}}}]`
)

func withSelectors(value string) func(*mcsv1beta1.ServiceExport) {
	return func(e *mcsv1beta1.ServiceExport) {
		e.Annotations = map[string]string{v1alpha1.AnnotationClusterSelectors: value}
	}
}

// KEP-5939 on the in-process ClusterSet: exporters that disagree are told with
// ClusterSelectorsConflict, the oldest's selectors and each importer's results land on the
// ServiceImport with the tiered allocation, members without a compared property are named in a
// condition and an event, and headless or malformed selectors are refused.
var _ = Describe("cluster selectors", func() {
	It("merges exporters' selectors with ClusterSelectorsConflict, and publishes each importer's results and the allocation", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		for i, m := range []*member{a, b} {
			create(ctx, m, httpService(ns, "web").Obj())
			createSlice(ctx, m, ns, "web", "web-"+m.Name, "10.97."+string(rune('1'+i))+".1")
		}
		export(ctx, a, ns, "web", withSelectors(ownCluster))
		Eventually(conditionOf(ctx, a, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("False/NoConflicts"))
		export(ctx, b, ns, "web", withSelectors(sameRegion))
		for _, m := range []*member{a, b} {
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("True/ClusterSelectorsConflict"))
		}
		Expect(exportMessage(ctx, b, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).To(ContainSubstring(`from cluster "a" is used`))

		By("the oldest export's selectors, each importer's own results and a tiered allocation in every member")
		for _, m := range members {
			Eventually(func(g Gomega) {
				si := serviceImport(ctx, m, ns, "web")
				g.Expect(si).NotTo(BeNil())
				g.Expect(si.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationClusterSelectors, ownCluster))
				// The own cluster selects only importers that export: c imports without exporting.
				want := `[{"clusters":["` + m.Name + `"]}]`
				if m == c {
					want = `[{}]`
				}
				g.Expect(si.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationClusterSelectorResults, want))
				g.Expect(meta.IsStatusConditionTrue(si.Status.Conditions, importplan.ConditionClusterSelection)).To(BeTrue())
				g.Expect(derivedService(ctx, m, ns, "web").Annotations).To(HaveKey(allocation.Annotation))
			}).Should(Succeed(), "in %s", m.Name)
		}

		By("b's selectors winning once a unexports, and no member having the region they compare")
		unexport(ctx, a, ns, "web")
		Eventually(conditionOf(ctx, b, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("False/NoConflicts"))
		for _, m := range members {
			Eventually(func(g Gomega) {
				si := serviceImport(ctx, m, ns, "web")
				g.Expect(si.Annotations).To(HaveKeyWithValue(v1alpha1.AnnotationClusterSelectors, sameRegion))
				cond := meta.FindStatusCondition(si.Status.Conditions, importplan.ConditionClusterSelection)
				g.Expect(cond).NotTo(BeNil())
				g.Expect(cond.Reason).To(Equal(importplan.ReasonClusterPropertyMissing))
				g.Expect(cond.Message).To(ContainSubstring("cluster b lacks region.topology.k8s.io"))
			}).Should(Succeed(), "in %s", m.Name)
			Eventually(importEvents).WithArguments(ctx, m, ns, "web").Should(ContainElement(HavePrefix("Warning/ClusterPropertyMissing: ")))
		}
	})

	It("refuses selectors on a headless Service (InvalidServiceType) and malformed ones (InvalidClusterSelector)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, a, httpService(ns, "pods").Obj(), func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone })
		create(ctx, a, httpService(ns, "typo").Obj())
		export(ctx, a, ns, "pods", withSelectors(ownCluster))
		export(ctx, a, ns, "typo", withSelectors(`[{"propertySelector":{}}]`))
		Eventually(conditionOf(ctx, a, ns, "pods", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/InvalidServiceType"))
		Expect(exportMessage(ctx, a, ns, "pods", mcsv1beta1.ServiceExportConditionValid)).To(ContainSubstring("only to ClusterSetIP Services"))
		Eventually(conditionOf(ctx, a, ns, "typo", mcsv1beta1.ServiceExportConditionValid)).Should(Equal("False/InvalidClusterSelector"))
		Eventually(exportEvents).WithArguments(ctx, a, ns, "typo").Should(ContainElement(HavePrefix("Warning/ExportInvalid: InvalidClusterSelector")))
		for _, m := range members {
			Expect(serviceImport(ctx, m, ns, "pods")).To(BeNil())
			Expect(serviceImport(ctx, m, ns, "typo")).To(BeNil())
		}
	})
})

// importEvents lists the events on a ServiceImport as "Type/Reason: note".
func importEvents(ctx context.Context, m *member, ns, name string) []string {
	list := &eventsv1.EventList{}
	Expect(m.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "ServiceImport" && e.Regarding.Name == name {
			out = append(out, e.Type+"/"+e.Reason+": "+strings.TrimSpace(e.Note))
		}
	}
	return out
}
