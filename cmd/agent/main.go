// Command agent is fleetslice's node agent: it programs this node's Service
// load balancing into nftables (or, with --dataplane=dry-run, renders what it
// would program). See docs/agent.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/knftables"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/controllers/apiclient"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/pkg/version"
)

const (
	dataplaneNFTables = "nftables"
	dataplaneDryRun   = "dry-run"
	backendNetlink    = "netlink"
	backendNft        = "nft"
)

// flags are what the agent's command line sets: the agent's own options (package agent owns
// their defaults and rules) and how its dataplanes and manager are built.
type flags struct {
	agent                                agent.Options
	kubeContext, dataplane, dryRunOutput string
	backend                              string
	metricsAddr, probeAddr, pprofAddr    string
	podCIDRs                             prefixList
	families                             familyList
	cleanup                              bool
	gcPercent                            int
}

func main() {
	f := bindFlags(flag.CommandLine)
	printVersion := flag.Bool("version", false, "print the version and exit")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *printVersion {
		fmt.Println("fleetslice agent", version.Version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("agent")

	if f.cleanup {
		if err := cleanup(context.Background(), f); err != nil {
			log.Error(err, "cleanup failed")
			os.Exit(1)
		}
		log.Info("deleted the fleetslice nftables tables", "families", f.families.String())
		return
	}
	if err := f.validate(); err != nil {
		log.Error(err, "invalid flags")
		os.Exit(2)
	}
	lowerCollectorGoal(f.gcPercent)
	log.Info("garbage collector", "gogc", collectorGoal())
	cfg, err := config.GetConfigWithContext(f.kubeContext)
	if err != nil {
		log.Error(err, "unable to load a kubeconfig")
		os.Exit(1)
	}
	apiclient.ForOwnCluster(cfg)
	// Where a node without kube-proxy finds its API server is the first thing to check when the
	// agent never syncs: a Service IP here needs the agent's own rules to be reachable.
	log.Info("API server", "host", cfg.Host)
	if err := run(ctrl.SetupSignalHandler(), cfg, f, log); err != nil {
		log.Error(err, "agent failed")
		os.Exit(1)
	}
}

// cleanup deletes the tables of --ip-families through --nftables-backend.
func cleanup(ctx context.Context, f *flags) error {
	if f.backend != backendNetlink && f.backend != backendNft {
		return fmt.Errorf("--nftables-backend must be %s or %s, not %q", backendNetlink, backendNft, f.backend)
	}
	if f.backend == backendNft {
		return agent.DeleteTables(ctx, nil, f.families...)
	}
	for _, fam := range f.families {
		if err := dataplane.DeleteTableNetlink(ctx, fam); err != nil {
			return fmt.Errorf("deleting table %s %s: %w", fam, dataplane.TableName, err)
		}
	}
	return nil
}

// bindFlags defines the agent's flags on fs (--kubeconfig comes from
// controller-runtime's config package), each defaulting to agent.DefaultOptions.
func bindFlags(fs *flag.FlagSet) *flags {
	f := &flags{agent: agent.DefaultOptions(), families: familyList{knftables.IPv4Family, knftables.IPv6Family}}
	a := &f.agent
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context to use (default: the current context)")
	fs.StringVar(&a.NodeName, "node-name", os.Getenv("NODE_NAME"), "Node this agent programs (default: $NODE_NAME)")
	fs.StringVar(&f.dataplane, "dataplane", dataplaneNFTables, "nftables: program the kernel; dry-run: only render the ruleset (nodes without nftables, simulated nodes)")
	fs.StringVar(&f.backend, "nftables-backend", backendNetlink, "with --dataplane=nftables, how tables are programmed: netlink (no nft program needed; a change costs the same whatever the table's size) or nft (runs the nft program per sync)")
	fs.StringVar(&f.dryRunOutput, "dry-run-output", agent.StdoutLog, `with --dataplane=dry-run, file the rendered ruleset is written to after each sync that changes it, or "-" for the log`)
	fs.Var(&f.podCIDRs, "pod-cidr", "pod network prefix (repeatable or comma-separated); traffic to cluster IPs from outside these is masqueraded (default: masquerade all)")
	fs.Var(&f.families, "ip-families", "IP families to program, comma-separated: IPv4, IPv6")
	fs.DurationVar(&a.SyncPeriod, "sync-period", a.SyncPeriod, "interval of full syncs, which compare every Service with the kernel's tables and write only where they differ, repairing drift")
	fs.DurationVar(&a.DriftCheckPeriod, "drift-check-period", a.DriftCheckPeriod, "how often the table is compared with what the agent programmed (with --nftables-backend=nft only its chains, sets and their sizes); drift is counted in fleetslice_agent_sync_proxy_rules_nftables_table_drift_total and repaired at once")
	fs.IntVar(&f.gcPercent, "gc-percent", defaultGCPercent, "Go's GOGC for the agent, when below the process's own ($GOGC): the heap grows by this percentage of what is live before the collector runs, so a lower value keeps the agent's resident memory closer to what it holds, at the cost of more collector CPU (0 leaves the collector alone)")
	fs.DurationVar(&a.MinSyncInterval, "min-sync-interval", a.MinSyncInterval, "least time between two syncs; a burst of changes within it makes one sync")
	fs.BoolVar(&a.WatchServiceImports, "watch-serviceimports", true, "add ServiceImport IPs to the derived Services of multi-cluster imports (skipped when the CRD is not installed)")
	fs.StringVar(&a.ClusterID, "cluster-id", os.Getenv("CLUSTER_ID"), "this cluster's id in the ClusterSet when the cluster has no ClusterProperty cluster.clusterset.k8s.io (the property wins, as for the manager); with an id imports of PreferSameCluster Services follow their cluster allocation, without one they spread over every cluster (default: $CLUSTER_ID)")
	fs.BoolVar(&f.cleanup, "cleanup", false, "delete the fleetslice nftables tables of --ip-families and exit")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "127.0.0.1:10290", `address the metrics endpoint binds to ("0" disables it)`)
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":10291", `address /healthz and /readyz bind to ("0" disables them)`)
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0", `address Go's pprof profiles are served on, e.g. 127.0.0.1:10292 ("0" disables them)`)
	return f
}

// validate checks the command line's own choices; the agent's options are checked by
// agent.Options.Validate once the dataplanes exist.
func (f *flags) validate() error {
	switch {
	case f.agent.NodeName == "":
		return errors.New("--node-name (or $NODE_NAME) is required")
	case f.dataplane != dataplaneNFTables && f.dataplane != dataplaneDryRun:
		return fmt.Errorf("--dataplane must be %s or %s, not %q", dataplaneNFTables, dataplaneDryRun, f.dataplane)
	case f.backend != backendNetlink && f.backend != backendNft:
		return fmt.Errorf("--nftables-backend must be %s or %s, not %q", backendNetlink, backendNft, f.backend)
	case len(f.families) == 0:
		return errors.New("--ip-families must name at least one family")
	case f.gcPercent < 0:
		return fmt.Errorf("--gc-percent %d must not be negative (0 leaves the collector alone)", f.gcPercent)
	case f.agent.ClusterID != "":
		if err := clusterid.Validate(f.agent.ClusterID); err != nil {
			return fmt.Errorf("--cluster-id: %w", err)
		}
	}
	return nil
}

// dataplaneOptions are the options of each family's dataplane.
func (f *flags) dataplaneOptions() []dataplane.Options {
	out := make([]dataplane.Options, 0, len(f.families))
	// Both families' tables live in the node's one network namespace and move its one ruleset
	// generation: sharing what they know of it spares each family's drift check a read of its
	// table after every write of the other.
	gens := dataplane.NewGenerations()
	for _, fam := range f.families {
		out = append(out, dataplane.Options{Family: fam, PodCIDRs: f.podCIDRs, Generations: gens})
	}
	return out
}

// agentOptions returns the agent's options with its dataplanes built, validated.
func (f *flags) agentOptions(log logr.Logger) (agent.Options, error) {
	if err := f.validate(); err != nil {
		return agent.Options{}, err
	}
	opts := f.agent
	opts.Log = log
	var dryRuns []*dataplane.DryRun
	for _, dpOpts := range f.dataplaneOptions() {
		switch {
		case f.dataplane == dataplaneDryRun:
			d, err := dataplane.NewDryRun(dpOpts)
			if err != nil {
				return opts, err
			}
			dryRuns = append(dryRuns, d)
			opts.Dataplanes = append(opts.Dataplanes, d)
		case f.backend == backendNetlink:
			s, err := dataplane.NewNetlink(dpOpts)
			if err != nil {
				return opts, err
			}
			opts.Dataplanes = append(opts.Dataplanes, s)
			// Say at once, not only at the first sync, when nftables is unusable.
			if err := dataplane.ProbeNetlink(dpOpts.Family); err != nil {
				log.Error(err, "nftables is not usable yet; the agent stays unready and retries (grant CAP_NET_ADMIN on a kernel with nf_tables, or use --dataplane=dry-run)")
			}
		default:
			opts.Dataplanes = append(opts.Dataplanes, agent.NewKernelNftDataplane(dpOpts, nil))
			if _, err := dataplane.Open(dpOpts.Family); err != nil {
				log.Error(err, "nftables is not usable yet; the agent stays unready and retries (install the nftables package and grant CAP_NET_ADMIN, or use --dataplane=dry-run)")
			}
		}
	}
	if len(dryRuns) > 0 {
		opts.OnSync = agent.RulesetWriter(f.dryRunOutput, log, dryRuns...)
	}
	return opts, opts.Validate()
}

func (f *flags) managerOptions(scheme *runtime.Scheme) ctrl.Options {
	return ctrl.Options{
		Scheme:                 scheme,
		Cache:                  agent.CacheOptions(f.agent.NodeName),
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.probeAddr,
		PprofBindAddress:       f.pprofAddr,
	}
}

// run starts the agent and blocks until ctx ends.
func run(ctx context.Context, cfg *rest.Config, f *flags, log logr.Logger) error {
	opts, err := f.agentOptions(log)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(mcsv1beta1.Install(scheme))
	mgr, err := ctrl.NewManager(cfg, f.managerOptions(scheme))
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	opts.APIReader = mgr.GetAPIReader()
	a, err := agent.New(mgr.GetCache(), opts)
	if err != nil {
		return err
	}
	if err := mgr.Add(a); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("dataplane", a.ReadyzCheck); err != nil {
		return err
	}
	log.Info("starting", "node", f.agent.NodeName, "dataplane", f.dataplane, "families", f.families.String(),
		"podCIDRs", f.podCIDRs.String(), "dryRunOutput", f.dryRunOutput)
	return mgr.Start(ctx)
}

// prefixList is a repeatable, comma-separated list of CIDR prefixes.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	parts := make([]string, len(*p))
	for i, x := range *p {
		parts[i] = x.String()
	}
	return strings.Join(parts, ",")
}

func (p *prefixList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR prefix: %w", s, err)
		}
		*p = append(*p, prefix.Masked())
	}
	return nil
}

// familyList is a comma-separated list of IP families; setting it replaces
// the default.
type familyList []knftables.Family

func (l *familyList) String() string {
	parts := make([]string, len(*l))
	for i, f := range *l {
		parts[i] = map[knftables.Family]string{knftables.IPv4Family: "IPv4", knftables.IPv6Family: "IPv6"}[f]
	}
	return strings.Join(parts, ",")
}

func (l *familyList) Set(v string) error {
	var out familyList
	for _, s := range strings.Split(v, ",") {
		var fam knftables.Family
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "ipv4", "ip", "4":
			fam = knftables.IPv4Family
		case "ipv6", "ip6", "6":
			fam = knftables.IPv6Family
		case "":
			continue
		default:
			return fmt.Errorf("unknown IP family %q (want IPv4 or IPv6)", s)
		}
		if !containsFamily(out, fam) {
			out = append(out, fam)
		}
	}
	*l = out
	return nil
}

func containsFamily(l familyList, f knftables.Family) bool {
	for _, x := range l {
		if x == f {
			return true
		}
	}
	return false
}
