// Command manager runs fleetslice's control-plane controllers in one controller-runtime manager.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/apiclient"
	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/pkg/version"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(mcsv1beta1.Install(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

func main() {
	var metricsAddr, probeAddr, pprofAddr, kubeContext, leaderNamespace string
	var leaderElect bool
	sliceOpts := endpointslice.DefaultOptions()
	flag.IntVar(&sliceOpts.MaxEndpointsPerSlice, "max-endpoints-per-slice", sliceOpts.MaxEndpointsPerSlice, "most endpoints in one EndpointSlice (1-1000)")
	flag.DurationVar(&sliceOpts.BatchPeriod, "endpoint-updates-batch-period", sliceOpts.BatchPeriod, "fixed delay before syncing a Service after a Pod change, as kube-controller-manager's; above 0 it replaces coalescing")
	flag.DurationVar(&sliceOpts.CoalesceQuiet, "endpoint-updates-quiet-period", sliceOpts.CoalesceQuiet, "a Pod change after this long without one syncs its Service at once; a burst syncs once it has been quiet this long")
	flag.DurationVar(&sliceOpts.CoalesceWindow, "endpoint-updates-window", sliceOpts.CoalesceWindow, "longest a burst of a Service's Pod changes that does not settle waits while its syncs are quick; after a sync that took longer it stretches to that sync's duration squared over this window (so a Service syncs a smaller share of the time the slower the API server answers), up to --endpoint-updates-max-delay")
	flag.DurationVar(&sliceOpts.CoalesceBudget, "endpoint-updates-max-delay", sliceOpts.CoalesceBudget, "longest any Pod change waits for its burst to settle, however slow the syncs (0 syncs every change at once)")
	qps := flag.Float64("kube-api-qps", float64(apiclient.DefaultQPS), "requests per second to the member cluster's API server (below 0: no limit)")
	burst := flag.Int("kube-api-burst", apiclient.DefaultBurst, "burst of requests to the member cluster's API server above --kube-api-qps")
	flag.IntVar(&sliceOpts.Concurrency, "concurrent-endpointslice-syncs", sliceOpts.Concurrency, "Services synced in parallel")
	flag.IntVar(&sliceOpts.CompactionSlack, "endpointslice-compaction-slack", sliceOpts.CompactionSlack, "slices a slice set may have above ceil(endpoints/max) before the emptiest are merged away")
	flag.Var(&sliceOpts.Services, "endpointslice-services", "Services to write EndpointSlices for: all (kube-controller-manager's EndpointSlice controller turned off) or opted-in (only selector-less Services annotated "+endpointslice.SelectorAnnotation+", so kube-controller-manager's controller can keep running, as on managed control planes)")
	flag.BoolVar(&sliceOpts.AdoptUpstreamSlices, "adopt-upstream-slices", false, "take over EndpointSlices managed by kube-controller-manager's controller (disable that controller first)")
	flag.Float64Var(&sliceOpts.Topology.OverloadThreshold, "topology-overload-threshold", sliceOpts.Topology.OverloadThreshold, "largest expected overload of an endpoint over its fair share that topology hints may cause (0.25 = 25%)")
	flag.IntVar(&sliceOpts.Topology.MinEndpointsPerZone, "topology-min-endpoints-per-zone", sliceOpts.Topology.MinEndpointsPerZone, "ready endpoints per zone needed to turn hints on (they turn off below 2 per zone)")
	var mcs multicluster.Options
	mcs.BindFlags(flag.CommandLine)
	brokerOptional := flag.Bool("broker-kubeconfig-optional", false,
		"run without multi-cluster services while --broker-kubeconfig does not exist (a member not joined to a ClusterSet yet)")
	flag.StringVar(&kubeContext, "context", "", "kubeconfig context to use (default: the current context)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address the metrics endpoint binds to (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address the health and readiness probes bind to")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "address Go's pprof profiles are served on, e.g. 127.0.0.1:6060 (0 disables them)")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so only one manager replica reconciles at a time")
	leaderLease := flag.Duration("leader-elect-lease-duration", 15*time.Second, "how long a standby replica waits after the leader's last renewal before it takes over")
	leaderRenew := flag.Duration("leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it steps down")
	leaderRetry := flag.Duration("leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the leader election Lease")
	flag.StringVar(&leaderNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the manager's own namespace when it runs in a cluster)")
	printVersion := flag.Bool("version", false, "print the version and exit")
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *printVersion {
		fmt.Println("fleetslice manager", version.Version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	if *brokerOptional && mcs.BrokerKubeconfig != "" {
		if _, err := os.Stat(mcs.BrokerKubeconfig); errors.Is(err, fs.ErrNotExist) {
			log.Info("not joined to a ClusterSet: multi-cluster services are off until the broker kubeconfig exists (fleetslice join writes it)",
				"brokerKubeconfig", mcs.BrokerKubeconfig)
			mcs.BrokerKubeconfig = ""
		}
	}
	if err := sliceOpts.Validate(); err != nil {
		log.Error(err, "invalid EndpointSlice controller flags")
		os.Exit(2)
	}
	if leaderElect && mcs.Enabled() {
		if err := mcs.ValidateLeaderElection(*leaderLease, *leaderRetry); err != nil {
			log.Error(err, "invalid leader election flags")
			os.Exit(2)
		}
	}
	cfg, err := config.GetConfigWithContext(kubeContext)
	if err != nil {
		log.Error(err, "unable to load a kubeconfig")
		os.Exit(1)
	}
	if err := apiclient.Throttle(cfg, "member", float32(*qps), *burst); err != nil {
		log.Error(err, "invalid client flags")
		os.Exit(2)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "manager.fleetslice.io",
		LeaderElectionNamespace: leaderNamespace,
		LeaseDuration:           leaderLease,
		RenewDeadline:           leaderRenew,
		RetryPeriod:             leaderRetry,
		// main returns as soon as the manager stops, so releasing the lease then is safe, and it
		// lets the next replica of a rolling upgrade lead at once instead of after the lease runs out.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         endpointslice.CacheOptions(),
	})
	if err != nil {
		log.Error(err, "unable to create manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	slices, err := endpointslice.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("endpointslice-controller"), sliceOpts)
	if err == nil {
		err = slices.SetupWithManager(ctx, mgr)
	}
	if err != nil {
		log.Error(err, "unable to set up the EndpointSlice controller")
		os.Exit(1)
	}
	if mcs.Enabled() {
		// One bound for both levels: zones inside a cluster and clusters in the ClusterSet.
		mcs.OverloadThreshold = sliceOpts.Topology.OverloadThreshold
		if err := multicluster.Setup(ctx, mgr, mcs); err != nil {
			log.Error(err, "unable to set up the multi-cluster services controllers")
			os.Exit(1)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "unable to set up ready check")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager exited with an error")
		os.Exit(1)
	}
}
