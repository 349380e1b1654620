package agentbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// Side by side: the agent and kube-proxy as the processes a node runs, one after the other, each
// in a network namespace of its own, both watching one API server that holds the same Services.

// The side-by-side modes (--agent-kube-proxy).
const (
	VersusAuto = "auto" // when the kube-proxy and agent binaries, root, ip and nft are all there
	VersusOn   = "on"
	VersusOff  = "off"
)

// versusSize is one Service count and endpoints per Service; agentOnly runs the agent alone, for
// sizes where kube-proxy's cold sync would take most of an hour.
type versusSize struct {
	services, endpoints int
	agentOnly           bool
}

// agentOnlySuffix marks a size the agent runs alone: "50000x10/agent".
const agentOnlySuffix = "/agent"

func (s versusSize) String() string {
	out := fmt.Sprintf("%dx%d", s.services, s.endpoints)
	if s.agentOnly {
		out += agentOnlySuffix
	}
	return out
}

// VersusSizes are measured side by side, QuickVersusSizes with --quick.
var (
	VersusSizes      = []string{"1000x10", "10000x10", "5000x50", "50000x10/agent"}
	QuickVersusSizes = []string{"100x10"}
)

const (
	versusRuns      = 5
	quickVersusRuns = 2
	// quietGap is how long after a sync a change is written, and how long a program must have
	// been idle before its table is listed to check a change: more than both programs' least
	// interval between syncs (1 s by default for each), so a change never waits for it and no
	// listing runs beside a sync the change still has coming.
	quietGap    = 1500 * time.Millisecond
	pollEvery   = 50 * time.Millisecond
	stepTimeout = 2 * time.Minute
	coldTimeout = 10 * time.Minute
	// addedNamespace holds the Services the "one Service added" step creates.
	addedNamespace = "added"
	// addedIPBase is where added Services' cluster IPs start inside the bench's service range,
	// far above the generated Services'.
	addedIPBase = 1 << 19
	// clusterIPOffset shifts the generated Services' cluster IPs past the ones the API server
	// keeps for itself.
	clusterIPOffset = 16
)

// serviceCIDR is the API server's --service-cluster-ip-range; it holds every cluster IP
// buildServices hands out (10.96.0.0 up) and the added ones.
const serviceCIDR = "10.96.0.0/12"

// The steps measured side by side, in order.
const (
	versusCold     = "cold sync (all Services present)"
	versusAdd      = "one Service added"
	versusEndpoint = "one endpoint changed"
	versusPercent  = "1% of Services changed at once"
)

func parseVersusSizes(specs []string) ([]versusSize, error) {
	var out []versusSize
	for _, spec := range specs {
		spec, agentOnly := strings.CutSuffix(strings.TrimSpace(spec), agentOnlySuffix)
		a, b, ok := strings.Cut(spec, "x")
		n, errN := strconv.Atoi(a)
		e, errE := strconv.Atoi(b)
		if !ok || errN != nil || errE != nil || n < 1 || n > MaxServices || e < 1 || e > MaxEndpoints || n*e > MaxEndpointAddresses {
			return nil, fmt.Errorf("side-by-side size %q: want SERVICESxENDPOINTS, such as 1000x10 (or 50000x10/agent for the agent alone), within 1..%d and 1..%d",
				spec, MaxServices, MaxEndpoints)
		}
		out = append(out, versusSize{services: n, endpoints: e, agentOnly: agentOnly})
	}
	return out, nil
}

// sample is one measured change in one program.
type versusSample struct {
	// own is the mean duration of the syncs the program reported while the change was
	// programmed (its sync_proxy_rules_duration_seconds; for the cold sync its full-sync
	// histogram), and syncs how many there were.
	own   float64
	syncs int
	// full and partial count the syncs of each kind among them.
	full, partial int
	// programming is the mean network_programming_duration observed, NaN when none was.
	programming float64
	// outside runs from the first API write (for the cold sync: starting the process) to the end
	// of the sync after which the table held the change, by the program's last-sync timestamp.
	outside time.Duration
	// commits and rss, for the full syncs after a restart (versus_resync.go): the nftables
	// commits in the namespace meanwhile, and the process's peak resident memory.
	commits, rss int64
}

type versusStep struct {
	name    string
	samples []versusSample
}

// programResult is one program at one size.
type programResult struct {
	name  string
	steps []versusStep
	// lines and counts describe the table after the cold sync.
	lines  int
	counts tableCounts
	rss    int64
	load   string
}

type versusResult struct {
	size     versusSize
	programs []programResult
}

// versusRun measures every size.
type versusRun struct {
	sizes []versusSize
	runs  int
	// coldRuns is how many times each program starts cold at each size; the changes are
	// measured in its last start.
	coldRuns int
	programs []program
	env      bench.Env
	check    *checker
}

func (v *versusRun) run(ctx context.Context) ([]versusResult, error) {
	var out []versusResult
	for _, size := range v.sizes {
		res, err := v.oneSize(ctx, size)
		if len(res.programs) > 0 {
			out = append(out, res)
		}
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			v.check.versusFailures = append(v.check.versusFailures, fmt.Sprintf("%s: %v", size, err))
		}
	}
	return out, nil
}

// startAPIServer starts etcd and kube-apiserver with a service range that holds the bench's
// cluster IPs.
func startAPIServer() (*envtest.Environment, client.Client, string, error) {
	dir, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer)
	if err != nil {
		return nil, nil, "", err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir, ControlPlaneStartTimeout: 2 * time.Minute}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", serviceCIDR)
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, "", fmt.Errorf("starting the API server: %w", err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		return nil, nil, "", errors.Join(err, env.Stop())
	}
	dir, err = os.MkdirTemp("", "fleetslice-versus-")
	if err != nil {
		return nil, nil, "", errors.Join(err, env.Stop())
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return nil, nil, "", errors.Join(err, env.Stop())
	}
	return env, c, kubeconfig, nil
}

func (v *versusRun) oneSize(ctx context.Context, size versusSize) (res versusResult, err error) {
	res.size = size
	api, c, kubeconfig, err := startAPIServer()
	if err != nil {
		return res, err
	}
	workdir := filepath.Dir(kubeconfig)
	defer func() {
		err = errors.Join(err, api.Stop(), os.RemoveAll(workdir))
	}()
	u, err := url.Parse(api.Config.Host)
	if err != nil {
		return res, err
	}
	services := buildServices(size.services, size.endpoints)
	// The range's first addresses are the network's and the kubernetes Service's.
	for i := range services {
		services[i].ClusterIPs = []netip.Addr{addrIn(10, 96, clusterIPOffset+i)}
	}
	start := time.Now()
	if err := populate(ctx, c, api.ControlPlane.Etcd.URL, services); err != nil {
		return res, err
	}
	v.env.Logf("side by side %s: %d Services and EndpointSlices written in %s", size, len(services),
		time.Since(start).Round(time.Millisecond))
	ch := &churn{}
	for _, p := range v.programs {
		if size.agentOnly && p.name != "agent" {
			continue
		}
		m := &measuring{versusRun: v, client: c, services: services, churn: ch, size: size}
		pr, err := m.program(ctx, p, u.Host, kubeconfig, workdir)
		services = m.services
		if pr.name != "" {
			res.programs = append(res.programs, pr)
		}
		if err != nil {
			return res, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	return res, nil
}

// measuring is one program's turn at one size.
type measuring struct {
	*versusRun
	client   client.Client
	services []dataplane.Service
	churn    *churn
	size     versusSize
	added    []dataplane.Service
}

func (m *measuring) program(ctx context.Context, p program, apiHostPort, kubeconfig, logDir string) (pr programResult, err error) {
	pr = programResult{name: p.name, load: loadAverage()}
	// A cold sync is one sample per process start: the earlier starts only sync and stop, each
	// in a namespace of its own, so every one begins from an empty table.
	var colds []versusSample
	for range max(m.coldRuns, 1) - 1 {
		r, err := startIn(p, apiHostPort, kubeconfig, logDir)
		if err != nil {
			return programResult{}, err
		}
		cold, err := m.cold(ctx, r)
		if err = errors.Join(err, r.stop()); err != nil {
			return programResult{}, err
		}
		colds = append(colds, cold)
	}
	r, err := startIn(p, apiHostPort, kubeconfig, logDir)
	if err != nil {
		return programResult{}, err
	}
	defer func() {
		if pr.rss == 0 { // resync took it before restarting the program
			pr.rss = r.peakRSS()
		}
		// Added Services go, so the next program starts from the same Services.
		for _, svc := range m.added {
			err = errors.Join(err, deleteService(context.WithoutCancel(ctx), m.client, svc))
		}
		err = errors.Join(err, r.stop())
	}()
	cold, err := m.cold(ctx, r)
	if err != nil {
		return pr, err
	}
	pr.steps = append(pr.steps, versusStep{name: versusCold, samples: append(colds, cold)})
	if pr.lines, pr.counts, err = r.tableSize(); err != nil {
		return pr, err
	}
	steps := []struct {
		name  string
		write func(ctx context.Context, round int, now time.Time) ([]string, error)
	}{
		{versusAdd, m.addService},
		{versusEndpoint, m.changeEndpoints(1)},
		{versusPercent, m.changeEndpoints(max(m.size.services/100, 1))},
	}
	for _, st := range steps {
		step := versusStep{name: st.name}
		for round := range m.runs {
			smp, err := r.step(ctx, func(now time.Time) ([]string, error) { return st.write(ctx, round, now) })
			if err != nil {
				pr.steps = append(pr.steps, step)
				return pr, fmt.Errorf("%s: %w", st.name, err)
			}
			m.env.Logf("side by side %s %-10s %-34s own %s, outside %s", m.size, p.name, st.name,
				seconds(smp.own), smp.outside.Round(time.Millisecond))
			step.samples = append(step.samples, smp)
		}
		pr.steps = append(pr.steps, step)
	}
	if err := m.resync(ctx, p, r, &pr, apiHostPort, kubeconfig, logDir); err != nil {
		return pr, fmt.Errorf("full resync: %w", err)
	}
	return pr, nil
}

// cold waits for r's first sync with every Service and samples it.
func (m *measuring) cold(ctx context.Context, r *running) (versusSample, error) {
	first, last := m.services[0], m.services[len(m.services)-1]
	want := []string{first.ClusterIPs[0].String(), last.ClusterIPs[0].String()}
	ended, after, err := r.await(ctx, r.started, time.Time{}, want, coldTimeout)
	if err != nil {
		return versusSample{}, fmt.Errorf("cold sync: %w", err)
	}
	cold := r.sampleOf(scrape{}, r.observed(ctx, scrape{}, after), ended.Sub(r.started), metricSyncFull)
	m.env.Logf("side by side %s %-10s %-34s own %s, outside %s", m.size, r.name, versusCold,
		seconds(cold.own), cold.outside.Round(time.Millisecond))
	return cold, nil
}

func (m *measuring) addService(ctx context.Context, _ int, now time.Time) ([]string, error) {
	svc := m.churn.newService(m.size.endpoints)
	svc.Namespace = addedNamespace
	svc.ClusterIPs = []netip.Addr{addrIn(10, 96, addedIPBase+m.churn.added)}
	m.added = append(m.added, svc)
	if err := createService(ctx, m.client, svc, now); err != nil {
		return nil, err
	}
	return []string{svc.ClusterIPs[0].String(), svc.Ports[0].Endpoints[0].Addr.Addr().String()}, nil
}

// changeEndpoints replaces one endpoint in each of count Services spread over the set, all
// written at once.
func (m *measuring) changeEndpoints(count int) func(ctx context.Context, round int, now time.Time) ([]string, error) {
	return func(ctx context.Context, round int, now time.Time) ([]string, error) {
		touched := map[int]bool{}
		var idx []int
		var want []string
		for k := range count {
			i := spread(len(m.services), count, k, round)
			if touched[i] {
				continue
			}
			touched[i] = true
			idx = append(idx, i)
			old := m.services[i].Ports[0].Endpoints
			m.services[i] = m.churn.replaceEndpoint(m.services[i], round)
			for j, ep := range m.services[i].Ports[0].Endpoints {
				if ep.Addr != old[j].Addr {
					want = append(want, ep.Addr.Addr().String())
				}
			}
		}
		return want, parallel(ctx, len(idx), func(ctx context.Context, k int) error {
			return updateSlice(ctx, m.client, m.services[idx[k]], now)
		})
	}
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
