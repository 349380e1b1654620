// Package agentbench is the `agent` part of `fleetslice bench`: how long the node agent's
// dataplane (agent/dataplane) takes to program its nftables table, from nothing (cold) and
// incrementally, at thousands of Services. It runs the real nft and kernel inside a throwaway
// network namespace when it can, else the dry-run dataplane (knftables' in-memory Fake), and
// says which.
package agentbench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
)

// Sizes are the Service counts measured, QuickSizes those of --quick.
var (
	Sizes      = []int{1_000, 5_000, 10_000}
	QuickSizes = []int{100, 500}
)

// Repetitions and budgets, full and quick. A measurement stops repeating early when one more
// run would take it past its budget, so the largest cold syncs run fewer times.
const (
	DefaultEndpoints = 10
	coldRuns         = 3
	quickColdRuns    = 2
	resyncRuns       = 3
	quickResyncRuns  = 2
	incrementalRuns  = 20
	quickRuns        = 5
	budget           = 20 * time.Second
	quickBudget      = 5 * time.Second
)

type partOptions struct {
	dataplane string
	sizes     []int
	endpoints int
	coldRuns  int
	runs      int
	budget    time.Duration
	// versus, versusSizes and versusRuns set up the side-by-side run with kube-proxy.
	versus      string
	versusSizes []string
	versusRuns  int
}

// Part is the `agent` benchmark.
func Part() bench.Part {
	// Defaults live here, not only in the flags, so a Part run without a command line (the quick
	// test) gets them too.
	o := &partOptions{dataplane: Auto, endpoints: DefaultEndpoints, versus: VersusAuto}
	return bench.Part{
		Name:  "agent",
		Title: "Node agent: nftables sync times, cold and incremental",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.dataplane, "agent-dataplane", o.dataplane,
				"agent part: auto (nftables when root with nft and ip, else dry-run), nftables (real kernel, in a throwaway network namespace) or dry-run")
			fs.IntSliceVar(&o.sizes, "agent-sizes", o.sizes,
				fmt.Sprintf("agent part: Service counts to measure (default %v, or %v with --quick)", Sizes, QuickSizes))
			fs.IntVar(&o.endpoints, "agent-endpoints", o.endpoints, "agent part: endpoints per Service")
			fs.IntVar(&o.coldRuns, "agent-cold-runs", o.coldRuns,
				fmt.Sprintf("agent part: cold and full syncs per size, and side-by-side cold starts of each program (default %d, or %d with --quick)", coldRuns, quickColdRuns))
			fs.IntVar(&o.runs, "agent-runs", o.runs,
				fmt.Sprintf("agent part: runs of each incremental change per size (default %d, or %d with --quick)", incrementalRuns, quickRuns))
			fs.DurationVar(&o.budget, "agent-budget", o.budget,
				fmt.Sprintf("agent part: stop repeating a measurement once one more run would take it past this (default %s, or %s with --quick)", budget, quickBudget))
			fs.StringVar(&o.versus, "agent-kube-proxy", o.versus,
				"agent part: run kube-proxy (nftables mode) and the agent binary side by side on one API server: auto (when the kube-proxy binary of make kube-proxy, bin/agent, root, ip and nft are all there), on or off")
			fs.StringSliceVar(&o.versusSizes, "agent-kube-proxy-sizes", o.versusSizes,
				fmt.Sprintf("agent part: side-by-side sizes as SERVICESxENDPOINTS, with /agent for the agent alone (default %v, or %v with --quick)", VersusSizes, QuickVersusSizes))
			fs.IntVar(&o.versusRuns, "agent-kube-proxy-runs", o.versusRuns,
				fmt.Sprintf("agent part: side-by-side runs of each change per size and program (default %d, or %d with --quick)", versusRuns, quickVersusRuns))
		},
		Run: o.run,
	}
}

func (o *partOptions) settings(quick bool) (settings, error) {
	s := settings{sizes: Sizes, endpoints: o.endpoints, coldRuns: coldRuns, resyncRuns: resyncRuns,
		runs: incrementalRuns, budget: budget}
	if quick {
		s = settings{sizes: QuickSizes, endpoints: o.endpoints, coldRuns: quickColdRuns, resyncRuns: quickResyncRuns,
			runs: quickRuns, budget: quickBudget}
	}
	if len(o.sizes) > 0 {
		s.sizes = o.sizes
	}
	if o.coldRuns > 0 {
		s.coldRuns, s.resyncRuns = o.coldRuns, o.coldRuns
	}
	if o.runs > 0 {
		s.runs = o.runs
	}
	if o.budget > 0 {
		s.budget = o.budget
	}
	for _, n := range s.sizes {
		if n < 1 || n > MaxServices {
			return s, fmt.Errorf("agent size %d must be within 1..%d", n, MaxServices)
		}
	}
	if s.endpoints < 1 || s.endpoints > MaxEndpoints || s.endpoints*slices.Max(s.sizes) > MaxEndpointAddresses {
		return s, fmt.Errorf("agent endpoints per Service %d must be within 1..%d, and %d in all at most",
			s.endpoints, MaxEndpoints, MaxEndpointAddresses)
	}
	return s, nil
}

// chosen is the dataplane a run measures and why.
type chosen struct {
	backend backend
	kernel  bool
	why     string
}

func choose(dataplaneFlag string) (chosen, error) {
	switch dataplaneFlag {
	case DryRun:
		return chosen{backend: &dryRunBackend{}, why: "asked for with --agent-dataplane=dry-run"}, nil
	case Nftables:
		b, err := newKernelBackend()
		if err != nil {
			return chosen{}, fmt.Errorf("--agent-dataplane=nftables: %w", err)
		}
		return chosen{backend: b, kernel: true, why: "asked for with --agent-dataplane=nftables"}, nil
	case Auto, "":
		if missing := kernelMissing(); len(missing) > 0 {
			return chosen{backend: &dryRunBackend{}, why: "the real one needs " + strings.Join(missing, " and ")}, nil
		}
		b, err := newKernelBackend()
		if err != nil {
			return chosen{backend: &dryRunBackend{}, why: "the real one failed to start: " + err.Error()}, nil
		}
		return chosen{backend: b, kernel: true, why: "running as root with nft and ip"}, nil
	}
	return chosen{}, fmt.Errorf("--agent-dataplane=%q: want %s, %s or %s", dataplaneFlag, Auto, Nftables, DryRun)
}

func (o *partOptions) run(ctx context.Context, env bench.Env) (rep *bench.Report, err error) {
	s, err := o.settings(env.Quick)
	if err != nil {
		return nil, err
	}
	versus, skipped, err := o.versusRun(env)
	if err != nil {
		return nil, err
	}
	dp, err := choose(o.dataplane)
	if err != nil {
		return nil, err
	}
	// The namespace goes whatever happens next, a cancelled context included.
	defer func() {
		if cerr := dp.backend.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the benchmark's network namespace: %w", cerr))
		}
	}()
	env.Logf("agent dataplane: %s (%s)", dataplaneName(dp.kernel), dp.why)
	check := &checker{}
	if versus != nil {
		versus.check = check
	}
	var results []sizeResult
	for _, n := range s.sizes {
		res, err := runSize(ctx, s, dp.backend, check, env, n)
		if err != nil {
			return nil, fmt.Errorf("agent, %d Services: %w", n, err)
		}
		results = append(results, res)
	}
	rep, err = buildReport(results, s, dp, check)
	if err != nil {
		return nil, err
	}
	if versus == nil {
		rep.Intro += "\n\n" + versusIntro(nil, 0, 0, skipped)
		return rep, nil
	}
	env.Logf("agent part: kube-proxy and the agent side by side at %v", versus.sizes)
	vres, err := versus.run(ctx)
	if err != nil {
		return nil, err
	}
	rep.Intro += "\n\n" + versusIntro(versus.sizes, versus.runs, versus.coldRuns, "")
	rep.Tables = append(append(rep.Tables, versusTables(vres)...), resyncTables(vres)...)
	rep.Checks = append(append(rep.Checks, check.versusCheck(true)...), resyncCheck(vres)...)
	rep.Checks = append(rep.Checks, versusMemoryChecks(vres)...)
	return rep, nil
}

// versusRun sets up the side-by-side run, or says why there is none: nil and the reason.
func (o *partOptions) versusRun(env bench.Env) (*versusRun, string, error) {
	specs, runs, colds := VersusSizes, versusRuns, coldRuns
	if env.Quick {
		specs, runs, colds = QuickVersusSizes, quickVersusRuns, quickColdRuns
	}
	if o.coldRuns > 0 {
		colds = o.coldRuns
	}
	if len(o.versusSizes) > 0 {
		specs = o.versusSizes
	}
	if o.versusRuns > 0 {
		runs = o.versusRuns
	}
	sizes, err := parseVersusSizes(specs)
	if err != nil {
		return nil, "", err
	}
	switch o.versus {
	case VersusOff:
		return nil, "turned off with --agent-kube-proxy=off", nil
	case VersusAuto, VersusOn:
	default:
		return nil, "", fmt.Errorf("--agent-kube-proxy=%q: want %s, %s or %s", o.versus, VersusAuto, VersusOn, VersusOff)
	}
	var missing []string
	kubeProxy, err := k8sbin.Path(k8sbin.KubeProxy)
	if err != nil {
		missing = append(missing, "the kube-proxy binary (make kube-proxy)")
	}
	if _, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer); err != nil {
		missing = append(missing, "etcd and kube-apiserver (make k8s-binaries)")
	}
	agentBinary, err := env.Binary("agent")
	if err != nil {
		missing = append(missing, "the agent binary (make build)")
	}
	missing = append(missing, kernelMissing()...)
	if len(missing) > 0 {
		why := "it needs " + strings.Join(missing, " and ")
		if o.versus == VersusOn {
			return nil, "", fmt.Errorf("--agent-kube-proxy=on: %s", why)
		}
		return nil, why, nil
	}
	return &versusRun{sizes: sizes, runs: runs, coldRuns: colds, env: env, check: nil,
		programs: []program{agentProgram(agentBinary), kubeProxyProgram(kubeProxy)}}, "", nil
}

func dataplaneName(kernel bool) string {
	if kernel {
		return Nftables
	}
	return DryRun
}

// versions names the nft binary and the kernel that ran, for the intro.
func versions() string {
	nft := "nft (version unknown)"
	if out, err := exec.Command("nft", "--version").Output(); err == nil {
		nft = strings.TrimSpace(string(out))
	}
	var u unix.Utsname
	kernel := "unknown"
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	return fmt.Sprintf("%s, Linux %s", nft, kernel)
}
