package multicluster_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

var _ = Describe("broker isolation", func() {
	It("refuses a member's writes to another member's records, slice copies and Lease", func(ctx SpecContext) {
		ns := newNamespace(ctx, b)
		create(ctx, b, httpService(ns, "web").Obj())
		createSlice(ctx, b, ns, "web", "web-b", "10.2.0.1")
		export(ctx, b, ns, "web", nil)
		recordKey := client.ObjectKey{Namespace: brokerNamespace, Name: names.RecordName("b", ns, "web")}
		Eventually(func() error {
			return a.BrokerClient.Get(ctx, recordKey, &v1alpha1.ServiceExportRecord{})
		}).Should(Succeed(), "every member may read every record")
		original := &v1alpha1.ServiceExportRecord{}
		Expect(a.BrokerClient.Get(ctx, recordKey, original)).To(Succeed())

		refused := func(err error) {
			GinkgoHelper()
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "refused by the broker, got %v", err)
		}

		By("overwriting b's record")
		tampered := original.DeepCopy()
		tampered.Spec.Ports = append(tampered.Spec.Ports, mcsv1beta1.ServicePort{Name: "evil", Port: 666, Protocol: corev1.ProtocolTCP})
		refused(a.BrokerClient.Update(ctx, tampered))

		By("taking over b's record by relabelling it")
		stolen := original.DeepCopy()
		stolen.Labels[v1alpha1.LabelSourceCluster] = "a"
		stolen.Spec.ClusterID = "a"
		refused(a.BrokerClient.Update(ctx, stolen))

		By("deleting b's record")
		refused(a.BrokerClient.Delete(ctx, original.DeepCopy()))

		By("creating a record in b's name")
		forged := &v1alpha1.ServiceExportRecord{
			ObjectMeta: metav1.ObjectMeta{Namespace: brokerNamespace, Name: names.RecordName("b", ns, "forged"), Labels: names.RecordLabels("b", ns, "forged")},
			Spec:       *original.Spec.DeepCopy(),
		}
		forged.Spec.ServiceName = "forged"
		refused(a.BrokerClient.Create(ctx, forged))

		By("creating a record labelled as a that speaks for b")
		disguised := forged.DeepCopy()
		disguised.Name = names.RecordName("a", ns, "forged")
		disguised.Labels = names.RecordLabels("a", ns, "forged")
		refused(a.BrokerClient.Create(ctx, disguised))

		By("rewriting and adding b's slice copies")
		copies := &discoveryv1.EndpointSliceList{}
		Eventually(func() ([]discoveryv1.EndpointSlice, error) {
			err := a.BrokerClient.List(ctx, copies, client.InNamespace(brokerNamespace), client.MatchingLabels(names.RecordLabels("b", ns, "web")))
			return copies.Items, err
		}).Should(HaveLen(1))
		copied := copies.Items[0].DeepCopy()
		copied.Endpoints[0].Addresses = []string{"6.6.6.6"}
		refused(a.BrokerClient.Update(ctx, copied))
		extra := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: brokerNamespace, Name: "extra", Labels: names.RecordLabels("b", ns, "web")},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		extra.Labels[discoveryv1.LabelManagedBy] = sliceplan.ManagedBy
		refused(a.BrokerClient.Create(ctx, extra))

		By("renewing or deleting b's Lease")
		lease := &coordinationv1.Lease{}
		Expect(a.BrokerClient.Get(ctx, client.ObjectKey{Namespace: brokerNamespace, Name: liveness.LeaseName("b")}, lease)).To(Succeed())
		refused(a.BrokerClient.Delete(ctx, lease.DeepCopy()))
		lease.Labels[v1alpha1.LabelSourceCluster] = "a"
		refused(a.BrokerClient.Update(ctx, lease))

		By("writing anything else in the broker")
		refused(a.BrokerClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: brokerNamespace, Name: "x"}}))

		By("b's record is untouched and a may still write its own")
		after := &v1alpha1.ServiceExportRecord{}
		Expect(clusterSet.Broker.Client.Get(ctx, recordKey, after)).To(Succeed())
		Expect(after.Spec).To(Equal(original.Spec))
		Expect(after.Labels).To(Equal(original.Labels))
		own := forged.DeepCopy()
		own.Name = names.RecordName("a", ns, "own")
		own.Labels = names.RecordLabels("a", ns, "own")
		own.Spec.ClusterID, own.Spec.ServiceName = "a", "own"
		Expect(a.BrokerClient.Create(ctx, own)).To(Succeed())
		// a's export controller withdraws it: a exports no such Service.
		Eventually(func() bool {
			return apierrors.IsNotFound(clusterSet.Broker.Client.Get(ctx, client.ObjectKeyFromObject(own), &v1alpha1.ServiceExportRecord{}))
		}).Should(BeTrue(), "a record without an export behind it is withdrawn")
	})
})
