package multicluster_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

// A member whose cluster id has the greatest length an id may have runs in a ClusterSet of its
// own: its id is in its Lease's and identity's names, in labels and in record names.
var _ = Describe("a cluster id of the greatest length", Ordered, func() {
	longID := ("longest-cluster-id-" + strings.Repeat("x", clusterid.MaxLength))[:clusterid.MaxLength]
	var set *clustersettest.ClusterSet
	var long, short *member

	BeforeAll(func(ctx SpecContext) {
		var err error
		set, err = clustersettest.Start(ctx, clustersettest.Options{
			Members:                        []string{longID, "short"},
			LeaseDuration:                  leaseDuration,
			RenewInterval:                  renewInterval,
			WithoutEndpointSliceController: true,
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(set.Stop)
		long, short = set.Members[0], set.Members[1]
	}, NodeTimeout(5*time.Minute))

	It("exports from and imports into that member", func(ctx SpecContext) {
		ns := "mcs-" + rand.String(6)
		for _, m := range set.Members {
			Expect(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		}
		create(ctx, long, httpService(ns, "web").Obj())
		createSlice(ctx, long, ns, "web", "web-long", "10.92.1.1")
		export(ctx, long, ns, "web", nil)
		Eventually(importClusters).WithArguments(ctx, short, ns, "web").Should(Equal([]string{longID}))
		Eventually(importedAddresses).WithArguments(ctx, short, ns, "web").Should(Equal([]string{"10.92.1.1"}))
		for _, s := range importedSlices(ctx, short, ns, "web") {
			Expect(s.Labels).To(HaveKeyWithValue(mcsv1beta1.LabelSourceCluster, longID))
			Expect(validation.IsDNS1123Label(s.Name)).To(BeEmpty(), "imported slice name %q", s.Name)
		}
		Expect(set.Broker.Client.Get(ctx, client.ObjectKey{Namespace: set.Broker.Namespace, Name: names.RecordName(longID, ns, "web")},
			&v1alpha1.ServiceExportRecord{})).To(Succeed())
		lease := &coordinationv1.Lease{}
		Expect(set.Broker.Client.Get(ctx, client.ObjectKey{Namespace: set.Broker.Namespace, Name: liveness.LeaseName(longID)}, lease)).To(Succeed())
		Expect(lease.Labels).To(HaveKeyWithValue(v1alpha1.LabelSourceCluster, longID))

		By("the other member exporting too, with a conflict to report on both")
		time.Sleep(1100 * time.Millisecond)
		create(ctx, short, httpService(ns, "web").Obj(), func(s *corev1.Service) { s.Spec.Ports[0].Port = 8080 })
		createSlice(ctx, short, ns, "web", "web-short", "10.92.2.1")
		export(ctx, short, ns, "web", nil)
		for _, m := range set.Members {
			Eventually(importClusters).WithArguments(ctx, m, ns, "web").Should(ConsistOf(longID, "short"), "in %s", m.Name)
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"10.92.1.1", "10.92.2.1"}), "in %s", m.Name)
			Eventually(conditionOf(ctx, m, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).Should(Equal("True/PortConflict"), "on %s's export", m.Name)
		}
		Expect(exportMessage(ctx, short, ns, "web", mcsv1beta1.ServiceExportConditionConflict)).To(ContainSubstring(longID))
	})
})
