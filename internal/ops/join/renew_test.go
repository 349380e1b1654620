package join_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/brokercreds"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
	"github.com/fleetslice/fleetslice/internal/ops/join"
)

// leaveAll takes both members out of whatever ClusterSet membership another spec left them in.
func leaveAll(ctx context.Context) {
	for _, m := range []*testenv.Cluster{memberA, memberB} {
		id, err := clusterid.Read(ctx, m.Client)
		Expect(err).NotTo(HaveOccurred())
		if id != "" {
			Expect(join.Leave(ctx, options(m, id))).To(Succeed())
		}
	}
}

func kubeSystemUID(ctx context.Context, m *testenv.Cluster) string {
	ns := &corev1.Namespace{}
	Expect(m.Client.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns)).To(Succeed())
	return string(ns.UID)
}

var _ = Describe("two joins racing for one cluster id", Ordered, func() {
	BeforeAll(leaveAll)
	AfterAll(leaveAll)

	It("leave exactly one owner, and the loser is told who owns it and writes nothing", func(ctx context.Context) {
		uids := map[*testenv.Cluster]string{memberA: kubeSystemUID(ctx, memberA), memberB: kubeSystemUID(ctx, memberB)}
		winners := map[*testenv.Cluster]int{}
		// Several rounds, so that both interleavings of the racing reads and creates come up.
		for round := range 6 {
			id := fmt.Sprintf("race-%d", round)
			racers := []*testenv.Cluster{memberA, memberB}
			errs := make([]error, len(racers))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, m := range racers {
				wg.Go(func() {
					<-start
					errs[i] = join.Join(ctx, options(m, id))
				})
			}
			close(start)
			wg.Wait()

			var winner, loser int
			switch {
			case errs[0] == nil && errs[1] != nil:
				winner, loser = 0, 1
			case errs[1] == nil && errs[0] != nil:
				winner, loser = 1, 0
			default:
				Fail(fmt.Sprintf("round %d: want exactly one join to succeed, got %v and %v", round, errs[0], errs[1]))
			}
			winners[racers[winner]]++
			Expect(errs[loser]).To(MatchError(And(ContainSubstring("already used by another member"), ContainSubstring(uids[racers[winner]]))),
				"the loser's error names the owner")
			sa := &corev1.ServiceAccount{}
			Expect(brokerEnv.Client.Get(ctx, client.ObjectKey{Namespace: broker.DefaultNamespace, Name: broker.ServiceAccountName(id)}, sa)).To(Succeed())
			Expect(sa.Annotations[join.MemberUIDAnnotation]).To(Equal(uids[racers[winner]]), "the identity is the winner's")
			_, err := memberSecret(ctx, racers[loser])
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the loser got no broker kubeconfig")
			lost, err := clusterid.Read(ctx, racers[loser].Client)
			Expect(err).NotTo(HaveOccurred())
			Expect(lost).To(BeEmpty(), "the loser got no cluster id")
			c := asMember(ctx, racers[winner])
			Expect(c.Create(ctx, copyOf(id))).To(Succeed(), "the winner's token writes as the id")
			Expect(join.Leave(ctx, options(racers[winner], id))).To(Succeed())
		}
		GinkgoWriter.Printf("wins: memberA %d, memberB %d\n", winners[memberA], winners[memberB])
	})

	It("converge on one owner when one cluster races itself", func(ctx context.Context) {
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = join.Join(ctx, options(memberA, "race-self")) })
		}
		wg.Wait()
		Expect(errs).To(HaveEach(Succeed()))
		sa := &corev1.ServiceAccount{}
		Expect(brokerEnv.Client.Get(ctx, client.ObjectKey{Namespace: broker.DefaultNamespace, Name: broker.ServiceAccountName("race-self")}, sa)).To(Succeed())
		Expect(sa.Annotations[join.MemberUIDAnnotation]).To(Equal(kubeSystemUID(ctx, memberA)))
		Expect(asMember(ctx, memberA).Create(ctx, copyOf("race-self"))).To(Succeed(), "whichever token was stored last works")
	})
})

// runningMember is a member's manager with its multi-cluster controllers, reading the broker
// kubeconfig from a file the spec writes from the member's Secret, as the kubelet does for the
// installed manager's Secret volume.
type runningMember struct {
	env  *testenv.Cluster
	file string
	stop context.CancelFunc
	done chan error
}

// syncFile plays the kubelet: it rewrites the mounted file from the Secret, by rename.
func (r *runningMember) syncFile(ctx context.Context) {
	s, err := memberSecret(ctx, r.env)
	Expect(err).NotTo(HaveOccurred())
	tmp := r.file + ".tmp"
	Expect(os.WriteFile(tmp, s.Data[join.SecretKey], 0o600)).To(Succeed())
	Expect(os.Rename(tmp, r.file)).To(Succeed())
}

func startManager(ctx context.Context, m *testenv.Cluster) *runningMember {
	r := &runningMember{env: m, file: filepath.Join(GinkgoT().TempDir(), "kubeconfig")}
	r.syncFile(ctx)
	scheme, err := testenv.Scheme()
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(m.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// Both members run controllers of the same names in this one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	runCtx, cancel := context.WithCancel(context.Background())
	mcs := multicluster.DefaultOptions()
	mcs.BrokerKubeconfig, mcs.LeaseDuration, mcs.RenewInterval = r.file, 3*time.Second, time.Second
	mcs.CredentialsCheckInterval = 200 * time.Millisecond
	Expect(multicluster.Setup(ctx, mgr, mcs)).To(Succeed())
	r.stop, r.done = cancel, make(chan error, 1)
	go func() { r.done <- mgr.Start(runCtx) }()
	DeferCleanup(func() {
		r.stop()
		Eventually(r.done, time.Minute).Should(Receive(BeNil()))
	})
	return r
}

func exportService(ctx context.Context, m *testenv.Cluster, ns, name, ip string) {
	Expect(m.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}},
	})).To(Succeed())
	Expect(m.Client.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abcde", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.fleetslice.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})).To(Succeed())
	Expect(m.Client.Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
}

// importedFrom returns the clusters m's ServiceImport ns/name lists; nil while it does not exist.
func importedFrom(ctx context.Context, m *testenv.Cluster, ns, name string) ([]string, error) {
	si := &mcsv1beta1.ServiceImport{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, si); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	out := []string{}
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out, nil
}

// credentialEvents returns the notes of m's events with the reason about the ClusterSet's
// ClusterProperty.
func credentialEvents(ctx context.Context, m *testenv.Cluster, reason string) []string {
	list := &eventsv1.EventList{}
	Expect(m.Client.List(ctx, list)).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.Kind == "ClusterProperty" && e.Regarding.Name == join.ClusterSetPropertyName {
			notes = append(notes, e.Type+": "+e.Note)
		}
	}
	return notes
}

func expiryMetric(member string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "fleetslice_multicluster_broker_credentials_expiry_timestamp_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "member" && l.GetValue() == member {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func secretExpiry(ctx context.Context, m *testenv.Cluster) time.Time {
	s, err := memberSecret(ctx, m)
	Expect(err).NotTo(HaveOccurred())
	t, err := time.Parse(time.RFC3339, s.Annotations[join.ExpiresAnnotation])
	Expect(err).NotTo(HaveOccurred(), "join records the token's expiry on the Secret")
	return t
}

var _ = Describe("renewing a member's broker token", Ordered, func() {
	const ns = "renew-demo"
	var east *runningMember

	BeforeAll(func(ctx context.Context) {
		leaveAll(ctx)
		DeferCleanup(leaveAll)
		// east's first token is inside the warning period, so its manager warns at once.
		first := options(memberA, "renew-east")
		first.TokenExpiration = 20 * 24 * time.Hour
		Expect(join.Join(ctx, first)).To(Succeed())
		Expect(join.Join(ctx, options(memberB, "renew-west"))).To(Succeed())
		for _, m := range []*testenv.Cluster{memberA, memberB} {
			Expect(client.IgnoreAlreadyExists(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		east = startManager(ctx, memberA)
		startManager(ctx, memberB)
	})

	It("warns 30 days ahead and shows the expiry as a metric", func(ctx context.Context) {
		expires := secretExpiry(ctx, memberA)
		Expect(time.Until(expires)).To(BeNumerically("~", 20*24*time.Hour, time.Hour))
		Eventually(func() float64 { return expiryMetric("renew-east") }, 30*time.Second).Should(Equal(float64(expires.Unix())))
		Eventually(func() []string { return credentialEvents(ctx, memberA, brokercreds.ReasonExpiring) }, 30*time.Second).
			Should(ContainElement(And(HavePrefix("Warning: "), ContainSubstring("in 19 days"), ContainSubstring("join --renew"))))
		Consistently(func() []string { return credentialEvents(ctx, memberB, brokercreds.ReasonExpiring) }, 2*time.Second).
			Should(BeEmpty(), "a token a year long is not warned about")
	})

	It("rotates the token while imports keep flowing both ways, without restarting the manager", func(ctx context.Context) {
		exportService(ctx, memberB, ns, "web", "10.2.0.1")
		Eventually(func() ([]string, error) { return importedFrom(ctx, memberA, ns, "web") }, time.Minute).Should(ConsistOf("renew-west"))
		oldClient := asMember(ctx, memberA)
		oldExpiry := secretExpiry(ctx, memberA)

		// Watch the existing import through the renewal: it must never go away or lose its source.
		var gaps atomic.Int32
		var lastGap atomic.Value
		watchCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for watchCtx.Err() == nil {
				clusters, err := importedFrom(watchCtx, memberA, ns, "web")
				if watchCtx.Err() == nil && (err != nil || len(clusters) != 1) {
					gaps.Add(1)
					lastGap.Store(fmt.Sprintf("clusters %v, error %v", clusters, err))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()

		res, err := join.Renew(ctx, join.Options{Broker: brokerEnv.Config, Member: memberA.Config})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Renewed).To(BeTrue())
		Expect(res.Restarted).To(BeFalse(), "a renewal needs no manager restart")
		newExpiry := secretExpiry(ctx, memberA)
		Expect(newExpiry).To(BeTemporally(">", oldExpiry.Add(300*24*time.Hour)), "the renewal asks for the default year")

		By("an export made while the kubelet has not yet refreshed the file arrives")
		exportService(ctx, memberB, ns, "api", "10.2.0.2")
		Eventually(func() ([]string, error) { return importedFrom(ctx, memberA, ns, "api") }, time.Minute).Should(ConsistOf("renew-west"))

		By("the manager takes the new token up once the file changes")
		east.syncFile(ctx)
		Eventually(func() float64 { return expiryMetric("renew-east") }, 30*time.Second).Should(Equal(float64(newExpiry.Unix())))
		Eventually(func() []string { return credentialEvents(ctx, memberA, brokercreds.ReasonRenewed) }, 30*time.Second).
			Should(ContainElement(And(HavePrefix("Normal: "), ContainSubstring(newExpiry.UTC().Format(time.RFC3339)))))

		By("exports made after the renewal flow both ways")
		exportService(ctx, memberB, ns, "after", "10.2.0.3")
		exportService(ctx, memberA, ns, "shop", "10.1.0.9")
		Eventually(func() ([]string, error) { return importedFrom(ctx, memberA, ns, "after") }, time.Minute).Should(ConsistOf("renew-west"))
		Eventually(func() ([]string, error) { return importedFrom(ctx, memberB, ns, "shop") }, time.Minute).Should(ConsistOf("renew-east"),
			"east publishes after taking up the renewed token")

		stopWatch()
		<-watched
		Expect(gaps.Load()).To(BeZero(), "the import of web went missing during the renewal (last: %v)", lastGap.Load())
		select {
		case err := <-east.done:
			Fail(fmt.Sprintf("east's manager stopped during the renewal: %v", err))
		default:
		}

		By("the old token lives until it expires, as documented")
		Expect(oldClient.List(ctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(broker.DefaultNamespace))).To(Succeed())
	})
})
