package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

var (
	cluster *testenv.Cluster
	k8s     client.Client
)

func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "node agent suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// Informers start and sync in well under a second, but CI machines are
	// shared and slow.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
	var err error
	cluster, err = testenv.Start("agent")
	Expect(err).NotTo(HaveOccurred())
	k8s = cluster.Client
})

var _ = AfterSuite(func() {
	Expect(cluster.Stop()).To(Succeed())
})

// runningAgent is an agent started in-process with its own filtered cache.
type runningAgent struct {
	*agent.Agent
	mu      sync.Mutex
	reports []agent.Report
}

// startAgent runs an agent for node until the spec ends.
func startAgent(node string, dataplanes []agent.Dataplane, mod func(*agent.Options)) *runningAgent {
	GinkgoHelper()
	return startAgentAs(cluster.Config, node, dataplanes, mod)
}

// startAgentAs runs an agent that talks to the API server with cfg.
func startAgentAs(cfg *rest.Config, node string, dataplanes []agent.Dataplane, mod func(*agent.Options)) *runningAgent {
	GinkgoHelper()
	opts := agent.CacheOptions(node)
	opts.Scheme = k8s.Scheme()
	c, err := cache.New(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	r := &runningAgent{}
	aopts := agent.DefaultOptions()
	aopts.NodeName, aopts.Dataplanes = node, dataplanes
	aopts.MinSyncInterval, aopts.RetryDelay, aopts.MaxRetryDelay = 50*time.Millisecond, 50*time.Millisecond, 200*time.Millisecond
	aopts.WatchServiceImports = true
	aopts.Log = ctrl.Log.WithName("agent")
	aopts.OnSync = func(rep agent.Report) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reports = append(r.reports, rep)
	}
	if mod != nil {
		mod(&aopts)
	}
	r.Agent, err = agent.New(c, aopts)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		Expect(c.Start(ctx)).To(Succeed())
	}()
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		Expect(r.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		wg.Wait()
	})
	return r
}

// last returns the last successful report.
func (r *runningAgent) last() (agent.Report, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.reports) - 1; i >= 0; i-- {
		if r.reports[i].Err == nil {
			return r.reports[i], true
		}
	}
	return agent.Report{}, false
}

func (r *runningAgent) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reports)
}

func (r *runningAgent) since(n int) []agent.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reports[n:])
}

// service returns the dataplane input the last successful sync used for key.
func (r *runningAgent) service(key types.NamespacedName) (dataplane.Service, bool) {
	rep, ok := r.last()
	if !ok {
		return dataplane.Service{}, false
	}
	return find(rep, key)
}

func find(rep agent.Report, key types.NamespacedName) (dataplane.Service, bool) {
	for _, s := range rep.Services {
		if s.Namespace == key.Namespace && s.Name == key.Name {
			return s, true
		}
	}
	return dataplane.Service{}, false
}

// endpointsOf lists "ip:port" (with "*" for local) of the named port's
// cluster endpoints, sorted; nil when the Service is not programmed.
func (r *runningAgent) endpointsOf(key types.NamespacedName, port string) []string {
	s, ok := r.service(key)
	if !ok {
		return nil
	}
	return portEndpoints(s, port)
}

func portEndpoints(s dataplane.Service, port string) []string {
	out := []string{}
	for _, p := range s.Ports {
		if p.Name != port {
			continue
		}
		for _, ep := range p.Endpoints {
			text := ep.Addr.String()
			if ep.Local {
				text += "*"
			}
			out = append(out, text)
		}
	}
	slices.Sort(out)
	return out
}

// flakyNFT is a knftables fake whose transactions fail while fail is set,
// like a kernel that refuses them.
type flakyNFT struct {
	*knftables.Fake
	fail atomic.Bool
}

var errRefused = errors.New("simulated: kernel refused the transaction")

func (f *flakyNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.fail.Load() {
		return errRefused
	}
	return f.Fake.Run(ctx, tx)
}

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-"}}
	Expect(k8s.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

var nodeSeq atomic.Int32

func newNode(zone string) string {
	GinkgoHelper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", nodeSeq.Add(1))}}
	if zone != "" {
		node.Labels = map[string]string{agent.ZoneLabel: zone}
	}
	Expect(k8s.Create(context.Background(), node)).To(Succeed())
	return node.Name
}

// endpoint is ready and serving unless flags says otherwise: flags is a
// subset of "r", "s", "t" (ready, serving, terminating) or "rs" by default.
func endpoint(ip, node, flags string, zones ...string) discoveryv1.Endpoint {
	if flags == "" {
		flags = "rs"
	}
	ep := discoveryv1.Endpoint{
		Addresses: []string{ip},
		Conditions: discoveryv1.EndpointConditions{
			Ready:       ptr.To(strings.Contains(flags, "r")),
			Serving:     ptr.To(strings.Contains(flags, "s")),
			Terminating: ptr.To(strings.Contains(flags, "t")),
		},
	}
	if node != "" {
		ep.NodeName = ptr.To(node)
	}
	if len(zones) > 0 {
		ep.Hints = &discoveryv1.EndpointHints{}
		for _, z := range zones {
			ep.Hints.ForZones = append(ep.Hints.ForZones, discoveryv1.ForZone{Name: z})
		}
	}
	return ep
}

// create creates obj, a builder's output (internal/lab/builders), and returns it as the API
// server stored it.
func create[T client.Object](obj T) T {
	GinkgoHelper()
	Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	return obj
}

func updateSlice(s *discoveryv1.EndpointSlice, mod func(*discoveryv1.EndpointSlice)) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		mod(s)
		return k8s.Update(context.Background(), s)
	}).Should(Succeed())
}

// metricValue sums the samples of a counter, gauge or histogram (its count)
// whose labels include want.
func metricValue(name string, want map[string]string) float64 {
	GinkgoHelper()
	v, _, err := testutil.MetricValue(name, want)
	Expect(err).NotTo(HaveOccurred())
	return v
}

func dryRun() *dataplane.DryRun {
	GinkgoHelper()
	d, err := dataplane.NewDryRun(dataplane.Options{})
	Expect(err).NotTo(HaveOccurred())
	return d
}

func ip(svc *corev1.Service) string { return netip.MustParseAddr(svc.Spec.ClusterIP).String() }

// addressPattern matches addr as a whole address in a ruleset, not as the start or end of a longer
// one (10.0.3.5 in 10.0.3.50).
func addressPattern(addr string) string {
	return `(^|[^0-9a-f.:])` + regexp.QuoteMeta(addr) + `($|[^0-9a-f.:])`
}
