package join_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
	"github.com/fleetslice/fleetslice/internal/ops/join"
)

func options(m *testenv.Cluster, id string) join.Options {
	return join.Options{Broker: brokerEnv.Config, Member: m.Config, ClusterID: id}
}

func memberSecret(ctx context.Context, m *testenv.Cluster) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: join.DefaultMemberNamespace, Name: join.SecretName}, s)
	return s, err
}

// asMember is a broker client authenticated with the kubeconfig join stored in the member.
func asMember(ctx context.Context, m *testenv.Cluster) client.Client {
	s, err := memberSecret(ctx, m)
	Expect(err).NotTo(HaveOccurred())
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.Data[join.SecretKey])
	Expect(err).NotTo(HaveOccurred())
	scheme, err := broker.Scheme()
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func copyOf(cluster string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			// Broker copies are named after their writer (names.BrokerCopyName), which the
			// broker's ownership policy requires of every new object.
			Name: names.BrokerCopyName(cluster, "demo", "web-abcde"), Namespace: broker.DefaultNamespace,
			Labels: names.RecordLabels(cluster, "demo", "web"),
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}

var _ = Describe("join and leave", Ordered, func() {
	It("refuses an invalid cluster id before touching anything", func(ctx context.Context) {
		Expect(join.Join(ctx, options(memberA, "East_1"))).To(MatchError(ContainSubstring("DNS-1123")))
		_, err := memberSecret(ctx, memberA)
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("joins: an identity that writes only its own records, the Secret, the ClusterProperty objects", func(ctx context.Context) {
		Expect(join.Join(ctx, options(memberA, "east"))).To(Succeed())
		sa := &corev1.ServiceAccount{}
		Expect(brokerEnv.Client.Get(ctx, client.ObjectKey{Namespace: broker.DefaultNamespace, Name: broker.ServiceAccountName("east")}, sa)).To(Succeed())
		Expect(sa.Annotations).To(HaveKey(join.MemberUIDAnnotation))
		id, err := clusterid.Read(ctx, memberA.Client)
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(Equal("east"))

		c := asMember(ctx, memberA)
		Expect(c.Create(ctx, copyOf("east"))).To(Succeed(), "a member writes its own copies")
		err = c.Create(ctx, copyOf("west"))
		Expect(err).To(HaveOccurred(), "a member must not write another cluster's copies")
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "refused by the admission policy: %v", err)
	})

	It("joins again idempotently, with a fresh token", func(ctx context.Context) {
		before, err := memberSecret(ctx, memberA)
		Expect(err).NotTo(HaveOccurred())
		Expect(join.Join(ctx, options(memberA, "east"))).To(Succeed())
		after, err := memberSecret(ctx, memberA)
		Expect(err).NotTo(HaveOccurred())
		Expect(after.UID).To(Equal(before.UID))
		list := &corev1.ServiceAccountList{}
		Expect(brokerEnv.Client.List(ctx, list, client.InNamespace(broker.DefaultNamespace))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
	})

	It("refuses an id another member holds, writing nothing", func(ctx context.Context) {
		err := join.Join(ctx, options(memberB, "east"))
		Expect(err).To(MatchError(ContainSubstring("already used by another member")))
		_, err = memberSecret(ctx, memberB)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Secret written")
		id, err := clusterid.Read(ctx, memberB.Client)
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(BeEmpty(), "no ClusterProperty written")
	})

	It("refuses a second id for a member that has one", func(ctx context.Context) {
		Expect(join.Join(ctx, options(memberA, "north"))).To(MatchError(ContainSubstring(`already has cluster id "east"`)))
		sa := &corev1.ServiceAccount{}
		err := brokerEnv.Client.Get(ctx, client.ObjectKey{Namespace: broker.DefaultNamespace, Name: broker.ServiceAccountName("north")}, sa)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no broker identity written")
	})

	It("leaves: records, identity, Secret and ClusterProperty gone, twice without error", func(ctx context.Context) {
		c := asMember(ctx, memberA)
		Expect(join.Leave(ctx, options(memberA, "east"))).To(Succeed())
		Expect(join.Leave(ctx, options(memberA, "east"))).To(Succeed())
		copies := &discoveryv1.EndpointSliceList{}
		Expect(brokerEnv.Client.List(ctx, copies, client.InNamespace(broker.DefaultNamespace))).To(Succeed())
		Expect(copies.Items).To(BeEmpty())
		_, err := memberSecret(ctx, memberA)
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
		id, err := clusterid.Read(ctx, memberA.Client)
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(BeEmpty())
		Eventually(func() error { return c.Create(ctx, copyOf("east")) }).Should(HaveOccurred(), "the old token no longer writes")
	})

	It("lets another cluster take a freed id", func(ctx context.Context) {
		Expect(join.Join(ctx, options(memberB, "east"))).To(Succeed())
	})
})
