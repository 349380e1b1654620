package multicluster_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/crds"
	"github.com/fleetslice/fleetslice/internal/provision/broker"
	"github.com/fleetslice/fleetslice/internal/testenv"
)

const (
	brokerNamespace = broker.DefaultNamespace
	// Short leases keep the lease tests fast; renewals every second.
	leaseDuration = 3 * time.Second
	renewInterval = time.Second
)

// member is one member cluster with its manager running in this process.
type member struct {
	id  string
	env *testenv.Cluster
	c   client.Client
	// proxy sits between the member and the broker, so tests can cut the member off.
	proxy *cuttableProxy
	// brokerConfig authenticates as the member's own broker identity, through the proxy.
	brokerConfig *rest.Config
	// brokerAsMember is a client with the member's broker identity, not through the proxy.
	brokerAsMember client.Client

	mu   sync.Mutex
	stop context.CancelFunc
	done chan struct{}
}

var (
	brokerEnv *testenv.Cluster
	members   []*member
	a, b, c   *member
)

func TestMulticluster(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(250 * time.Millisecond)
	RunSpecs(t, "multicluster suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))

	brokerCRDs, err := crds.Broker()
	Expect(err).NotTo(HaveOccurred())
	memberCRDs, err := crds.ClusterProperty()
	Expect(err).NotTo(HaveOccurred())

	// Four control planes start in parallel: a broker and three members.
	ids := []string{"a", "b", "c"}
	envs := make([]*testenv.Cluster, len(ids)+1)
	errs := make([]error, len(ids)+1)
	var wg sync.WaitGroup
	for i := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == len(ids) {
				envs[i], errs[i] = testenv.StartWith("broker", brokerCRDs...)
				return
			}
			envs[i], errs[i] = testenv.StartWith("member-"+ids[i], memberCRDs...)
		}()
	}
	wg.Wait()
	DeferCleanup(func() {
		for _, env := range envs {
			if env != nil {
				Expect(env.Stop()).To(Succeed())
			}
		}
	})
	for _, err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
	brokerEnv = envs[len(ids)]

	kubeconfigs, err := broker.Prepare(ctx, brokerEnv.Config, brokerNamespace, ids, broker.Options{})
	Expect(err).NotTo(HaveOccurred())
	brokerURL, err := url.Parse(brokerEnv.Config.Host)
	Expect(err).NotTo(HaveOccurred())

	scheme, err := broker.Scheme()
	Expect(err).NotTo(HaveOccurred())
	for i, id := range ids {
		m := &member{id: id, env: envs[i], c: envs[i].Client}
		m.proxy, err = newCuttableProxy(brokerURL.Host)
		Expect(err).NotTo(HaveOccurred())
		direct, err := broker.RESTConfig(kubeconfigs[id])
		Expect(err).NotTo(HaveOccurred())
		m.brokerAsMember, err = client.New(direct, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		m.brokerConfig = rest.CopyConfig(direct)
		m.brokerConfig.Host = "https://" + m.proxy.Addr()
		members = append(members, m)
	}
	a, b, c = members[0], members[1], members[2]

	// a finds its id in its ClusterProperty, b and c are given theirs.
	Expect(clusterid.Ensure(ctx, a.c, "a")).To(Succeed())
	for _, m := range members {
		id := m.id
		if m == a {
			id = ""
		}
		m.start(multicluster.Options{ClusterID: id})
	}
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	// The control planes stop in BeforeSuite's cleanup, after this.
	for _, m := range members {
		m.stopManager()
		m.proxy.Close()
	}
})

// start runs the member's manager with the multi-cluster controllers until stopManager.
func (m *member) start(opts multicluster.Options) {
	scheme, err := testenv.Scheme()
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(m.env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Several members run in this process, each with the same controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     ctrl.Log.WithName(m.id),
	})
	Expect(err).NotTo(HaveOccurred())
	opts.BrokerConfig = m.brokerConfig
	opts.BrokerNamespace = brokerNamespace
	opts.LeaseDuration = leaseDuration
	opts.RenewInterval = renewInterval
	ctx, cancel := context.WithCancel(context.Background())
	Expect(multicluster.Setup(ctx, mgr, opts)).To(Succeed())

	done := make(chan struct{})
	m.mu.Lock()
	m.stop, m.done = cancel, done
	m.mu.Unlock()
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
}

func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stop != nil
}

func (m *member) stopManager() {
	m.mu.Lock()
	stop, done := m.stop, m.done
	m.stop, m.done = nil, nil
	m.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	Eventually(done).WithTimeout(30 * time.Second).Should(BeClosed())
}
