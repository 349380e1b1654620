package multicluster_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

// A member still publishing the exports it started with (its Lease says so) holds back every
// peer's new imports, so that each is created once with all its exporters; imports that exist
// follow changes meanwhile, and the held-back ones are created as soon as the announcement goes.
var _ = Describe("a member publishing the exports it started with", func() {
	It("holds back new imports until it is done, not existing ones", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		create(ctx, a, httpService(ns, "old").Obj())
		createSlice(ctx, a, ns, "old", "old-a", "10.1.0.1")
		export(ctx, a, ns, "old", nil)
		Eventually(importedAddresses).WithArguments(ctx, b, ns, "old").Should(Equal([]string{"10.1.0.1"}))

		By("a live member z announcing its first publication")
		now := metav1.NewMicroTime(time.Now())
		z := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: brokerNamespace, Name: liveness.LeaseName("z"),
				Labels:      map[string]string{v1alpha1.LabelSourceCluster: "z"},
				Annotations: map[string]string{v1alpha1.AnnotationPublishingSince: now.UTC().Format(time.RFC3339Nano)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("z"), LeaseDurationSeconds: ptr.To(int32(3600)), RenewTime: &now},
		}
		Expect(clusterSet.Broker.Client.Create(ctx, z)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(clusterSet.Broker.Client.Delete(ctx, z))).To(Succeed())
		})

		create(ctx, a, httpService(ns, "new").Obj())
		createSlice(ctx, a, ns, "new", "new-a", "10.1.0.2")
		export(ctx, a, ns, "new", nil)
		Eventually(exportCondition).WithArguments(ctx, a, ns, "new", mcsv1beta1.ServiceExportConditionReady).Should(HaveField("Status", metav1.ConditionTrue))
		createSlice(ctx, a, ns, "old", "old-a-2", "10.1.0.3")
		Eventually(importedAddresses).WithArguments(ctx, b, ns, "old").Should(ConsistOf("10.1.0.1", "10.1.0.3"),
			"an existing import follows its exporters meanwhile")
		Consistently(serviceImport).WithArguments(ctx, b, ns, "new").WithTimeout(3*time.Second).Should(BeNil(),
			"the new import waits for z")

		By("z done publishing")
		Expect(clusterSet.Broker.Client.Get(ctx, client.ObjectKeyFromObject(z), z)).To(Succeed())
		delete(z.Annotations, v1alpha1.AnnotationPublishingSince)
		Expect(clusterSet.Broker.Client.Update(ctx, z)).To(Succeed())
		for _, m := range members {
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "new").Should(Equal([]string{"10.1.0.2"}), "in %s", m.Name)
		}
	})
})
