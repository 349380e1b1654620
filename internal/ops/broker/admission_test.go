package broker_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

// kind builds the three kinds of object a member writes in the broker, each as cluster
// `owner` would write it for the Service shop/web, under the name cluster `namedFor` would use.
type kind struct {
	name  string
	build func(namespace, owner, namedFor string) client.Object
}

var kinds = []kind{
	{"ServiceExportRecord", func(namespace, owner, namedFor string) client.Object {
		return &v1alpha1.ServiceExportRecord{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names.RecordName(namedFor, "shop", "web"), Labels: names.RecordLabels(owner, "shop", "web")},
			Spec: v1alpha1.ServiceExportRecordSpec{
				ClusterID: owner, ServiceNamespace: "shop", ServiceName: "web", Type: mcsv1beta1.ClusterSetIP,
				ExportCreationTimestamp: metav1.Now(),
			},
		}
	}},
	{"EndpointSlice copy", func(namespace, owner, namedFor string) client.Object {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: namespace, Name: names.BrokerCopyName(namedFor, "shop", "web-abcde"), Labels: names.RecordLabels(owner, "shop", "web")},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
		}
	}},
	{"Lease", func(namespace, owner, namedFor string) client.Object {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: liveness.LeaseName(namedFor), Labels: map[string]string{v1alpha1.LabelSourceCluster: owner}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(owner), LeaseDurationSeconds: ptr.To[int32](10)},
		}
	}},
}

// A member that writes another member's records is the bad input here; each identity is the
// ServiceAccount token broker.Prepare issues, exactly what a member's manager is given.
var _ = Describe("the broker's admission policy", Ordered, func() {
	const namespace = "bad-input-broker"
	// The victim has an id of the greatest length a cluster id may have.
	attacker, victim := "east", strings.Repeat("w", clusterid.MaxLength)
	clients := map[string]client.Client{}

	BeforeAll(func(ctx SpecContext) {
		kubeconfigs, err := broker.Prepare(ctx, brokerEnv.Config, namespace, []string{attacker, victim}, broker.Options{})
		Expect(err).NotTo(HaveOccurred())
		scheme, err := broker.Scheme()
		Expect(err).NotTo(HaveOccurred())
		for cluster, kubeconfig := range kubeconfigs {
			cfg, err := broker.RESTConfig(kubeconfig)
			Expect(err).NotTo(HaveOccurred())
			clients[cluster], err = client.New(cfg, client.Options{Scheme: scheme})
			Expect(err).NotTo(HaveOccurred())
		}
	})

	// refused asserts the broker refused a write with a message naming the writing identity and
	// saying one of says: when two policies refuse a write, the API server reports whichever it
	// evaluated first, and that order is not fixed.
	refused := func(err error, says ...string) {
		GinkgoHelper()
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "refused by the broker, got %v", err)
		Expect(err.Error()).To(ContainSubstring(broker.ServiceAccountName(attacker)), "the message names who was refused")
		reasons := make([]types.GomegaMatcher, 0, len(says))
		for _, s := range says {
			reasons = append(reasons, ContainSubstring(s))
		}
		Expect(err.Error()).To(Or(reasons...))
	}

	for _, k := range kinds {
		It("lets a member create, update and delete its own "+k.name, func(ctx SpecContext) {
			for _, cluster := range []string{attacker, victim} {
				own := k.build(namespace, cluster, cluster)
				Expect(clients[cluster].Create(ctx, own)).To(Succeed(), "%s writes its own", cluster)
				own.SetAnnotations(map[string]string{"touched": "yes"})
				Expect(clients[cluster].Update(ctx, own)).To(Succeed())
				Expect(clients[cluster].Delete(ctx, own)).To(Succeed())
			}
		})

		It("refuses a member every write to another member's "+k.name, func(ctx SpecContext) {
			theirs := k.build(namespace, victim, victim)
			Expect(clients[victim].Create(ctx, theirs)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(clients[victim].Delete(ctx, theirs)).To(Succeed()) })

			By("creating one labelled with the other's cluster id")
			forged := k.build(namespace, victim, victim)
			forged.SetName(forged.GetName() + "x")
			// A record of the victim's names the victim in spec.clusterID too, which the records
			// policy refuses as well: either policy's message may come back.
			speaksForVictim := "spec.clusterID " + victim + " is not the writing member"
			refused(clients[attacker].Create(ctx, forged), "label is "+victim, speaksForVictim)

			By("creating one under the other's name, labelled as itself")
			squatter := k.build(namespace, attacker, victim)
			squatter.SetName(squatter.GetName() + "x")
			refused(clients[attacker].Create(ctx, squatter), "")

			By("changing the other's object")
			changed := theirs.DeepCopyObject().(client.Object)
			changed.SetAnnotations(map[string]string{"evil": "yes"})
			refused(clients[attacker].Update(ctx, changed), "label is "+victim, speaksForVictim)

			By("relabelling the other's object as its own")
			stolen := theirs.DeepCopyObject().(client.Object)
			stolen.GetLabels()[v1alpha1.LabelSourceCluster] = attacker
			refused(clients[attacker].Update(ctx, stolen), "written by cluster "+victim, speaksForVictim)

			By("deleting the other's object")
			refused(clients[attacker].Delete(ctx, theirs.DeepCopyObject().(client.Object)), "written by cluster "+victim)

			By("the other's object is as it wrote it")
			after := theirs.DeepCopyObject().(client.Object)
			Expect(brokerEnv.Client.Get(ctx, client.ObjectKeyFromObject(theirs), after)).To(Succeed())
			Expect(after.GetResourceVersion()).To(Equal(theirs.GetResourceVersion()))
		})
	}

	It("refuses a record whose spec speaks for another cluster than its label", func(ctx SpecContext) {
		disguised := kinds[0].build(namespace, attacker, attacker).(*v1alpha1.ServiceExportRecord)
		disguised.Spec.ClusterID = victim
		refused(clients[attacker].Create(ctx, disguised), "spec.clusterID "+victim+" is not the writing member")
	})

	It("refuses an object squatting a name another member will need, before that member writes it", func(ctx SpecContext) {
		// Names are deterministic: whoever holds the victim's name first would keep the victim
		// from ever publishing (its create collides, and it may not update what it did not write).
		for _, k := range kinds {
			squatter := k.build(namespace, attacker, victim)
			err := clients[attacker].Create(ctx, squatter)
			if err == nil {
				Expect(brokerEnv.Client.Delete(ctx, squatter)).To(Succeed())
			}
			refused(err, "")
			Expect(clients[victim].Create(ctx, k.build(namespace, victim, victim))).To(Succeed(), "%s: the victim can still publish", k.name)
			Expect(clients[victim].Delete(ctx, k.build(namespace, victim, victim))).To(Succeed())
		}
	})
})
