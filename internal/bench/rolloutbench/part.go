// Package rolloutbench is the `endpointslice-e2e` part of `fleetslice bench`: the same Deployment
// rollout on two simulated clusters of a local ClusterSet, one whose EndpointSlices fleetslice's
// manager writes and one whose kube-controller-manager's own controller writes, counted by each
// API server; then both scaled to 10,000 Pods for the controllers' resident memory.
package rolloutbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/internal/bench"
	"github.com/fleetslice/fleetslice/internal/e2ebench"
	"github.com/fleetslice/fleetslice/internal/localset"
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
	batch                   time.Duration
	timeout                 time.Duration
}

// Part is the `endpointslice-e2e` benchmark.
func Part() bench.Part {
	o := &partOptions{batch: time.Second}
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
			fs.DurationVar(&o.batch, "endpointslice-e2e-batch-period", o.batch,
				"endpointslice-e2e part: endpoint updates batch period given to both controllers")
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

func (o *partOptions) run(ctx context.Context, env bench.Env) (report *bench.Report, err error) {
	sz, err := o.sizes(env.Quick)
	if err != nil {
		return nil, err
	}
	manager, err := env.Binary("manager")
	if err != nil {
		return nil, err
	}
	workdir, err := os.MkdirTemp("", "fleetslice-bench-rollout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(workdir)

	kcmArgs := map[string]string{}
	if o.batch > 0 {
		kcmArgs["endpointslice-updates-batch-period"] = o.batch.String()
	}
	env.Logf("endpointslice-e2e: bringing up 2 clusters of %d Nodes", sz.nodes)
	cs, err := localset.Up(ctx, localset.Options{
		Workdir: workdir, Clusters: 2, NodesPerCluster: sz.nodes, ControllerManagerArgs: kcmArgs,
		UpstreamEndpointSlices: []string{localset.MemberName(2)}, DisableQPSLimits: true, NoBroker: true, Log: env.Log,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		err = errors.Join(err, localset.Down(context.WithoutCancel(ctx), cs.Workdir, env.Log))
	}()
	proc, err := cs.StartProcess("manager-"+cs.Members[0], manager,
		"--kubeconfig", cs.Kubeconfig, "--context", localset.Context(cs.Members[0]),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--endpoint-updates-batch-period", o.batch.String())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, proc.Describe(20))
		}
		err = errors.Join(err, proc.Stop(10*time.Second))
	}()

	opts := e2ebench.Options{Pods: sz.pods, Timeout: env.PhaseTimeout(o.timeout), Log: env.Log}
	sides, err := e2ebench.Rollout(ctx, cs, opts)
	if err != nil {
		return nil, err
	}
	mem, err := measureMemory(ctx, cs, sides, proc.PID(), sz.memoryPods, opts)
	if err != nil {
		return nil, err
	}
	return buildReport(env, sz, o.batch, sides, mem)
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
// kube-controller-managers, then scales both Deployments and reads it again. The cluster whose
// kube-controller-manager runs without its EndpointSlice controller gives the baseline the
// other one's controller adds to.
func measureMemory(ctx context.Context, cs *localset.ClusterSet, sides []e2ebench.Side, managerPID, pods int, opts e2ebench.Options) (*memory, error) {
	type process struct {
		row memoryRow
		pid int
	}
	var procs []process
	procs = append(procs, process{row: memoryRow{process: "fleetslice manager", cluster: sides[0].Cluster, role: "fleetslice's EndpointSlice controller"}, pid: managerPID})
	for i, role := range []string{"without its EndpointSlice controller", "with its EndpointSlice controller"} {
		pid, err := e2ebench.ControllerManagerPID(cs, sides[i].Cluster)
		if err != nil {
			return nil, err
		}
		procs = append(procs, process{row: memoryRow{process: "kube-controller-manager", cluster: sides[i].Cluster, role: role}, pid: pid})
	}
	for i := range procs {
		procs[i].row.afterRollout = e2ebench.ResidentBytes(procs[i].pid)
	}
	if err := e2ebench.Scale(ctx, cs, sides, pods, opts); err != nil {
		return nil, err
	}
	out := &memory{}
	for _, p := range procs {
		p.row.atScale = e2ebench.ResidentBytes(p.pid)
		if p.row.afterRollout == 0 || p.row.atScale == 0 {
			return nil, fmt.Errorf("cannot read the resident memory of %s (pid %d) in %s", p.row.process, p.pid, p.row.cluster)
		}
		out.rows = append(out.rows, p.row)
	}
	return out, nil
}
