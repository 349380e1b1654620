package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/faultproxy"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// member is one cluster of the set with fleetslice running on it: one manager replica (two in
// the leader election fault) and one dry-run agent.
type member struct {
	name     string
	client   client.Client
	cfg      *rest.Config
	replicas []*replica
	agent    *localset.Process
}

// replica is one manager process. It reaches its member and the broker through proxies of its
// own, so each replica's writes are counted apart and faults reach only it.
type replica struct {
	name         string
	process      *localset.Process
	api, broker  *faultproxy.Proxy
	metrics      string
	args         []string
	kubeconfig   string
	brokerConfig string
	member       *member

	// The replica is supervised as a kubelet would: if it exits when the test did not stop it
	// (a lost leader election on a loaded machine, say), it is started again a second later.
	mu       sync.Mutex
	stopping bool
	restarts int
}

func newMember(ctx context.Context, name string) (*member, error) {
	cfg, err := clusterSet.RESTConfig(name)
	if err != nil {
		return nil, err
	}
	c, err := clusterSet.Client(name)
	if err != nil {
		return nil, err
	}
	return &member{name: name, client: c, cfg: cfg}, nil
}

// startReplica starts one more manager replica with the suite's flags plus extra.
func (m *member) startReplica(extra []string) error {
	r := &replica{name: fmt.Sprintf("manager-%s-%d", m.name, len(m.replicas)), member: m, args: extra}
	var err error
	if r.api, err = faultproxy.StartFromKubeconfig(clusterSet.Kubeconfig, localset.Context(m.name)); err != nil {
		return err
	}
	if r.broker, err = faultproxy.StartFromKubeconfig(clusterSet.BrokerKubeconfig(m.name), ""); err != nil {
		return err
	}
	r.kubeconfig = filepath.Join(clusterSet.Workdir, r.name+".kubeconfig")
	r.brokerConfig = filepath.Join(clusterSet.Workdir, r.name+"-broker.kubeconfig")
	if err := r.api.WriteKubeconfig(r.kubeconfig); err != nil {
		return err
	}
	if err := r.broker.WriteKubeconfig(r.brokerConfig); err != nil {
		return err
	}
	m.replicas = append(m.replicas, r)
	return r.start()
}

// start runs the replica's process (again).
func (r *replica) start() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	r.metrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	args := append([]string{
		"--kubeconfig", r.kubeconfig, "--broker-kubeconfig", r.brokerConfig,
		"--cluster-lease-duration", size.Lease.String(),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", port), "--health-probe-bind-address", "0",
	}, r.args...)
	p, err := localset.StartProcess(filepath.Join(clusterSet.Workdir, "logs"), r.name, filepath.Join(binDir, "manager"), args...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.process, r.stopping = p, false
	r.mu.Unlock()
	go r.supervise(p)
	return nil
}

func (r *replica) supervise(p *localset.Process) {
	for {
		if exited, _ := p.Exited(); exited {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.mu.Lock()
	unexpected := !r.stopping && r.process == p
	if unexpected {
		r.restarts++
	}
	r.mu.Unlock()
	if !unexpected {
		return
	}
	fmt.Fprintf(GinkgoWriter, "%s\nrestarting it, as a kubelet would\n", p.Describe(5))
	time.Sleep(time.Second)
	if err := r.start(); err != nil {
		fmt.Fprintf(GinkgoWriter, "restarting %s: %v\n", r.name, err)
	}
}

// unexpectedRestarts is how often the replica exited without the test stopping it.
func (r *replica) unexpectedRestarts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restarts
}

// stop ends the replica with SIGTERM, as a rolling upgrade does.
func (r *replica) stop() error {
	r.mu.Lock()
	r.stopping = true
	p := r.process
	r.mu.Unlock()
	return p.Stop(15 * time.Second)
}

// kill ends the replica as a crash or an OOM kill would: no lease released, nothing flushed.
func (r *replica) kill() error {
	r.mu.Lock()
	r.stopping = true
	p := r.process
	r.mu.Unlock()
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { exited, _ := p.Exited(); return exited, nil })
}

// running is the replica's current process.
func (r *replica) running() *localset.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.process
}

// writes are what the replica wrote through its proxies, Leases left out (renewals are the
// only writes a quiet manager is expected to make).
type writes struct{ api, broker faultproxy.Counts }

func (r *replica) counts() writes { return writes{api: r.api.Counts(), broker: r.broker.Counts()} }

func (w writes) sub(before writes) writes {
	return writes{api: w.api.Sub(before.api), broker: w.broker.Sub(before.broker)}
}

func (w writes) total() int { return w.api.Writes("leases") + w.broker.Writes("leases") }

func (w writes) String() string {
	return fmt.Sprintf("member: %s; broker: %s", w.api.OnlyWrites(), w.broker.OnlyWrites())
}

// idle waits until the replica has worked through everything it was given: its work queues
// empty and no reconcile started for quiet.
func (r *replica) idle(ctx context.Context, quiet time.Duration) error {
	last, since := -1.0, time.Now()
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, size.Settle, true, func(ctx context.Context) (bool, error) {
		if exited, err := r.running().Exited(); exited {
			return false, fmt.Errorf("%s exited: %v", r.name, err)
		}
		depth, reconciles, err := r.queueState(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		lastErr = nil
		if depth > 0 || reconciles != last {
			last, since = reconciles, time.Now()
			return false, nil
		}
		return time.Since(since) >= quiet, nil
	})
	if err != nil && lastErr != nil {
		return errors.Join(err, lastErr)
	}
	return err
}

// scrape reads the replica's metrics.
func (r *replica) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	return parser.TextToMetricFamilies(resp.Body)
}

// queueState reads the replica's work queue depth and reconcile count from its metrics. The
// membership controller is left out: it judges the peers' Leases at every renewal, so it never
// goes quiet.
func (r *replica) queueState(ctx context.Context) (depth, reconciles float64, err error) {
	families, err := r.scrape(ctx)
	if err != nil {
		return 0, 0, err
	}
	notMembership := func(label string) func(*dto.Metric) bool {
		return func(m *dto.Metric) bool { return labelValue(m, label) != "multicluster-membership" }
	}
	return sumMetric(families, "workqueue_depth", notMembership("name")),
		sumMetric(families, "controller_runtime_reconcile_total", notMembership("controller")), nil
}

// sumMetric adds up the gauges and counters of the family name that keep accepts.
func sumMetric(families map[string]*dto.MetricFamily, name string, keep func(*dto.Metric) bool) float64 {
	total := 0.0
	if f := families[name]; f != nil {
		for _, m := range f.Metric {
			if keep(m) {
				total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// reconnectWaits is how many lists and watches of the replica's caches of server ("member" or
// "broker") waited for their API server to answer again.
func (r *replica) reconnectWaits(ctx context.Context, server string) (float64, error) {
	families, err := r.scrape(ctx)
	if err != nil {
		return 0, err
	}
	return sumMetric(families, "fleetslice_reconnect_waits_total", func(m *dto.Metric) bool { return labelValue(m, "server") == server }), nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// leads reports whether the replica holds the leader election Lease, from its own metrics.
func (r *replica) leads(ctx context.Context) (bool, error) {
	families, err := r.scrape(ctx)
	if err != nil {
		return false, err
	}
	f := families["leader_election_master_status"]
	if f == nil {
		return false, nil
	}
	for _, m := range f.Metric {
		if m.Gauge != nil && m.Gauge.GetValue() == 1 {
			return true, nil
		}
	}
	return false, nil
}

// startAgent runs a dry-run agent for one Node of the member.
func (m *member) startAgent() error {
	node := clusterSet.AgentNodes(m.name)[0]
	var err error
	m.agent, err = clusterSet.StartProcess("agent-"+node, filepath.Join(binDir, "agent"), agentArgs(m, node, clusterSet.RulesetPath(node))...)
	return err
}

func agentArgs(m *member, node, output string) []string {
	return []string{"--kubeconfig", clusterSet.Kubeconfig, "--context", localset.Context(m.name), "--node-name", node,
		"--cluster-id", m.name, "--dataplane=dry-run", "--dry-run-output", output,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}
}

// agentMatchesFreshRender starts a second agent for the same Node and waits until the running
// agent's ruleset equals what the new one renders from scratch.
func (m *member) agentMatchesFreshRender(ctx context.Context) error {
	node := clusterSet.AgentNodes(m.name)[0]
	fresh := filepath.Join(clusterSet.Workdir, "rulesets", node+".fresh.nft")
	_ = os.Remove(fresh)
	p, err := clusterSet.StartProcess("agent-fresh-"+node, filepath.Join(binDir, "agent"), agentArgs(m, node, fresh)...)
	if err != nil {
		return err
	}
	defer p.Stop(10 * time.Second) //nolint:errcheck // a stop failure shows in the leftovers check
	var want, got []byte
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if want, err = os.ReadFile(fresh); err != nil {
			return false, nil
		}
		got, err = os.ReadFile(clusterSet.RulesetPath(node))
		return err == nil && canonical(string(got)) == canonical(string(want)), nil
	})
	if err != nil {
		return fmt.Errorf("the agent of %s does not match a fresh render: %w\n%s", node, err, testutil.FirstDifference(canonical(string(got)), canonical(string(want))))
	}
	return nil
}

// canonical orders a dry-run ruleset's set elements: a set has no order, and the dump lists them
// in the order they were added, which differs between an agent that saw history and a new one.
func canonical(ruleset string) string {
	var rest, elements []string
	for _, line := range strings.Split(ruleset, "\n") {
		if strings.HasPrefix(line, "add element ") {
			elements = append(elements, line)
		} else {
			rest = append(rest, line)
		}
	}
	slices.Sort(elements)
	return strings.Join(append(rest, elements...), "\n")
}

func (m *member) stop() {
	for _, r := range m.replicas {
		if r.running() != nil {
			_ = r.stop()
		}
		_ = r.api.Close()
		_ = r.broker.Close()
	}
	if m.agent != nil {
		_ = m.agent.Stop(10 * time.Second)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
