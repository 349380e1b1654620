// Package rolloutbench is the `endpointslice-e2e` part of `fleetslice bench`: a Deployment rolled
// out on a simulated cluster of a local ClusterSet where fleetslice's manager and
// kube-controller-manager's own controller both write the EndpointSlices of its Service, each its
// own set, their writes told apart in the API server's audit log; then scaled up for the
// controllers' resident memory, against a second cluster whose kube-controller-manager runs
// without its EndpointSlice controller.
package rolloutbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

type sizes struct {
	pods, memoryPods, nodes int
}

var (
	fullSizes  = sizes{pods: 1000, memoryPods: 10000, nodes: 50}
	quickSizes = sizes{pods: 60, memoryPods: 300, nodes: 6}
)

type partOptions struct {
	pods, memoryPods, nodes int
	runs                    int
	only                    []int
	timeout                 time.Duration
}

// setting is one way of running both controllers: a ClusterSet of its own, the Deployment created,
// rolled out runs times, and (in the headline setting only) scaled up for memory.
type setting struct {
	name string
	// unlimitedCluster lifts the client-side rate limits of the cluster's own components
	// (kube-controller-manager with its EndpointSlice controller, the scheduler); otherwise every
	// component runs at its default limits, as in a real cluster. fleetslice's manager always
	// runs at its own defaults.
	unlimitedCluster bool
	// batch is the endpoint updates batch period given to both controllers; 0 is both defaults.
	batch time.Duration
	// headline settings are both controllers at their defaults; the part's invariants hold there.
	headline, scale bool
}

// chooseSettings picks settings by their 1-based numbers; none given is every one (the first with
// quick).
func chooseSettings(quick bool, only []int) ([]setting, error) {
	all := settings()
	if len(only) == 0 {
		if quick {
			return all[:1], nil
		}
		return all, nil
	}
	var out []setting
	for _, n := range only {
		if n < 1 || n > len(all) {
			return nil, fmt.Errorf("--endpointslice-e2e-settings: no setting %d (1..%d)", n, len(all))
		}
		out = append(out, all[n-1])
	}
	return out, nil
}

func settings() []setting {
	return []setting{
		{name: "defaults: every component at its default client limits, batch period 0", headline: true, scale: true},
		{name: "defaults, the cluster's own components without client limits", unlimitedCluster: true, headline: true},
		{name: "tuned: both controllers with a 1 s batch period, no client limits on the cluster's components", unlimitedCluster: true, batch: time.Second},
	}
}

// Part is the `endpointslice-e2e` benchmark.
func Part() bench.Part {
	o := &partOptions{}
	return bench.Part{
		Name:  "endpointslice-e2e",
		Title: "EndpointSlice controller on a local ClusterSet: fleetslice beside kube-controller-manager",
		Flags: func(fs *pflag.FlagSet) {
			fs.IntVar(&o.pods, "endpointslice-e2e-pods", 0,
				fmt.Sprintf("endpointslice-e2e part: replicas rolled out (default %d, %d with --quick)", fullSizes.pods, quickSizes.pods))
			fs.IntVar(&o.memoryPods, "endpointslice-e2e-memory-pods", 0,
				fmt.Sprintf("endpointslice-e2e part: replicas the memory is read at (default %d, %d with --quick)", fullSizes.memoryPods, quickSizes.memoryPods))
			fs.IntVar(&o.nodes, "endpointslice-e2e-nodes", 0,
				fmt.Sprintf("endpointslice-e2e part: simulated Nodes per cluster, 250 Pods each (default %d, %d with --quick)", fullSizes.nodes, quickSizes.nodes))
			fs.IntVar(&o.runs, "endpointslice-e2e-runs", 0, "endpointslice-e2e part: rollouts per setting (default 3, 1 with --quick)")
			fs.IntSliceVar(&o.only, "endpointslice-e2e-settings", nil, "endpointslice-e2e part: run only these settings, by number (1 defaults at real-cluster limits, 2 defaults without the cluster's limits, 3 batch period 1 s; default all, 1 with --quick)")
			fs.DurationVar(&o.timeout, "endpointslice-e2e-timeout", 0, "endpointslice-e2e part: how long each phase may take "+bench.PhaseTimeoutHelp)
		},
		Run: o.run,
	}
}

func (o *partOptions) sizes(quick bool) (sizes, error) {
	s := fullSizes
	if quick {
		s = quickSizes
	}
	for _, override := range []struct {
		value int
		into  *int
	}{{o.pods, &s.pods}, {o.memoryPods, &s.memoryPods}, {o.nodes, &s.nodes}} {
		if override.value > 0 {
			*override.into = override.value
		}
	}
	if s.memoryPods < s.pods {
		return s, fmt.Errorf("memory is read at %d Pods, fewer than the %d rolled out", s.memoryPods, s.pods)
	}
	// Each simulated Node takes 250 Pods and has a /24 Pod range.
	if need := (s.memoryPods + 249) / 250; s.nodes < need {
		return s, fmt.Errorf("%d Pods need at least %d simulated Nodes, have %d", s.memoryPods, need, s.nodes)
	}
	return s, nil
}

func (o *partOptions) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	sz, err := o.sizes(env.Quick)
	if err != nil {
		return nil, err
	}
	manager, err := env.Binary("manager")
	if err != nil {
		return nil, err
	}
	runs := o.runs
	if runs <= 0 {
		runs = 3
		if env.Quick {
			runs = 1
		}
	}
	chosen, err := chooseSettings(env.Quick, o.only)
	if err != nil {
		return nil, err
	}
	var results []settingResult
	for _, st := range chosen {
		res, err := o.runSetting(ctx, env, sz, st, runs, manager)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		results = append(results, res)
	}
	return buildReport(env, sz, results)
}

// settingResult is what one setting measured.
type settingResult struct {
	setting
	sides []e2ebench.Side
	mem   *memory
}

// The compared cluster runs both controllers; the baseline, only in a setting that reads memory,
// runs kube-controller-manager without its EndpointSlice controller.
var (
	compared = localset.MemberName(1)
	baseline = localset.MemberName(2)
)

// runSetting measures one setting.
func (o *partOptions) runSetting(ctx context.Context, env bench.Env, sz sizes, st setting, runs int, manager string) (res settingResult, err error) {
	res.setting = st
	workdir, err := os.MkdirTemp("", "fleetslice-bench-rollout-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(workdir)
	kcmArgs := map[string]string{}
	managerArgs := []string{}
	if st.batch > 0 {
		kcmArgs["endpointslice-updates-batch-period"] = st.batch.String()
		managerArgs = append(managerArgs, "--endpoint-updates-batch-period", st.batch.String())
	}
	clusters, base := 1, ""
	if st.scale {
		clusters, base = 2, baseline
	}
	env.Logf("endpointslice-e2e: %s: bringing up %d cluster(s) of %d Nodes", st.name, clusters, sz.nodes)
	cs, err := localset.Up(ctx, localset.Options{
		Workdir: workdir, Clusters: clusters, NodesPerCluster: sz.nodes, ControllerManagerArgs: kcmArgs,
		UpstreamEndpointSlices: []string{compared}, DisableQPSLimits: st.unlimitedCluster,
		AuditEndpointSliceWrites: true, NoBroker: true, Log: env.Log,
	})
	if err != nil {
		return res, err
	}
	defer func() {
		err = errors.Join(err, localset.Down(context.WithoutCancel(ctx), cs.Workdir, env.Log))
	}()
	metricsAddr, err := localset.FreeLoopbackAddress()
	if err != nil {
		return res, err
	}
	proc, err := cs.StartProcess("manager-"+compared, manager, append([]string{
		"--kubeconfig", cs.Kubeconfig, "--context", localset.Context(compared),
		"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", "0"}, managerArgs...)...)
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, proc.Describe(20))
		}
		err = errors.Join(err, proc.Stop(10*time.Second))
	}()
	managerMetrics := "http://" + metricsAddr + "/metrics"
	if err := e2ebench.WaitForMetrics(ctx, managerMetrics, time.Minute); err != nil {
		return res, err
	}
	opts := e2ebench.Options{Pods: sz.pods, Timeout: env.PhaseTimeout(o.timeout), Log: env.Log}
	cmp, err := e2ebench.NewComparison(cs, compared, base, managerMetrics, opts)
	if err != nil {
		return res, err
	}
	if err := cmp.SetUp(ctx); err != nil {
		return res, err
	}
	for run := 1; run <= runs; run++ {
		env.Logf("endpointslice-e2e: %s: rollout %d of %d", st.name, run, runs)
		if err := cmp.RollOut(ctx); err != nil {
			return res, err
		}
	}
	if st.scale {
		res.mem, err = measureMemory(ctx, cs, cmp, proc.PID(), sz.memoryPods)
	}
	res.sides = cmp.Sides
	return res, err
}

// memory is each process's resident set after the rollout and at the larger scale.
type memory struct {
	rows []memoryRow
}

type memoryRow struct {
	process, cluster, role string
	afterRollout, atScale  int64
}

// measureMemory reads the resident memory of fleetslice's manager and of both clusters'
// kube-controller-managers, then scales the Deployment (and the baseline's copy) and reads it
// again. The baseline's kube-controller-manager, which runs without its EndpointSlice controller
// through the same steps, is what the compared cluster's one adds to.
func measureMemory(ctx context.Context, cs *localset.ClusterSet, cmp *e2ebench.Comparison, managerPID, pods int) (*memory, error) {
	type process struct {
		row memoryRow
		pid int
	}
	procs := []process{{row: memoryRow{process: "fleetslice manager", cluster: cmp.Cluster, role: "fleetslice's EndpointSlice controller"}, pid: managerPID}}
	for _, kcm := range []struct{ cluster, role string }{
		{cmp.Baseline, "without its EndpointSlice controller"},
		{cmp.Cluster, "with its EndpointSlice controller"},
	} {
		pid, err := e2ebench.ControllerManagerPID(cs, kcm.cluster)
		if err != nil {
			return nil, err
		}
		procs = append(procs, process{row: memoryRow{process: "kube-controller-manager", cluster: kcm.cluster, role: kcm.role}, pid: pid})
	}
	for i := range procs {
		procs[i].row.afterRollout = localset.ResidentBytes(procs[i].pid)
	}
	if err := cmp.Scale(ctx, pods); err != nil {
		return nil, err
	}
	out := &memory{}
	for _, p := range procs {
		p.row.atScale = localset.ResidentBytes(p.pid)
		if p.row.afterRollout == 0 || p.row.atScale == 0 {
			return nil, fmt.Errorf("cannot read the resident memory of %s (pid %d) in %s", p.row.process, p.pid, p.row.cluster)
		}
		out.rows = append(out.rows, p.row)
	}
	return out, nil
}
