package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/fleetslice/fleetslice/controllers/apiclient"
	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// options are everything the manager's flags set. Each controller package owns its options'
// defaults (DefaultOptions) and rules (Validate); this file only binds them to flags and derives
// what one flag decides for two controllers.
type options struct {
	slices                                                   endpointslice.Options
	mcs                                                      multicluster.Options
	qps                                                      float64
	burst                                                    int
	brokerOptional                                           bool
	kubeContext, metricsAddr, probeAddr, pprofAddr, leaderNS string
	leaderElect                                              bool
	leaderLease, leaderRenew, leaderRetry                    time.Duration
	printVersion                                             bool
}

func bindFlags(fs *flag.FlagSet) *options {
	o := &options{slices: endpointslice.DefaultOptions(), mcs: multicluster.DefaultOptions()}
	s := &o.slices
	fs.IntVar(&s.MaxEndpointsPerSlice, "max-endpoints-per-slice", s.MaxEndpointsPerSlice, "most endpoints in one EndpointSlice (1-1000)")
	fs.DurationVar(&s.BatchPeriod, "endpoint-updates-batch-period", s.BatchPeriod, "fixed delay before syncing a Service after a Pod change, as kube-controller-manager's; above 0 it replaces coalescing")
	fs.DurationVar(&s.CoalesceQuiet, "endpoint-updates-quiet-period", s.CoalesceQuiet, "a Pod change after this long without one syncs its Service at once; a burst syncs once it has been quiet this long")
	fs.DurationVar(&s.CoalesceWindow, "endpoint-updates-window", s.CoalesceWindow, "longest a burst of a Service's Pod changes that does not settle waits while its syncs are quick; after a sync that took longer it stretches to that sync's duration squared over this window (so a Service syncs a smaller share of the time the slower the API server answers), up to --endpoint-updates-max-delay")
	fs.DurationVar(&s.CoalesceBudget, "endpoint-updates-max-delay", s.CoalesceBudget, "longest any Pod change waits for its burst to settle, however slow the syncs (0 syncs every change at once)")
	fs.Float64Var(&o.qps, "kube-api-qps", float64(apiclient.DefaultQPS), "requests per second to the member cluster's API server (below 0: no limit)")
	fs.IntVar(&o.burst, "kube-api-burst", apiclient.DefaultBurst, "burst of requests to the member cluster's API server above --kube-api-qps")
	fs.IntVar(&s.Concurrency, "concurrent-endpointslice-syncs", s.Concurrency, "Services synced in parallel")
	fs.IntVar(&s.CompactionSlack, "endpointslice-compaction-slack", s.CompactionSlack, "slices a slice set may have above ceil(endpoints/max) before the emptiest are merged away")
	fs.Var(&s.Services, "endpointslice-services", "Services to write EndpointSlices for: all (kube-controller-manager's EndpointSlice controller turned off) or opted-in (only selector-less Services annotated "+endpointslice.SelectorAnnotation+", so kube-controller-manager's controller can keep running, as on managed control planes)")
	fs.BoolVar(&s.AdoptUpstreamSlices, "adopt-upstream-slices", s.AdoptUpstreamSlices, "take over EndpointSlices managed by kube-controller-manager's controller (disable that controller first)")
	fs.Float64Var(&s.Topology.OverloadThreshold, "topology-overload-threshold", s.Topology.OverloadThreshold, "largest expected overload of an endpoint over its fair share that topology hints, and the allocation of PreferSameCluster imports across clusters, may cause (0.25 = 25%; 0: none)")
	fs.IntVar(&s.Topology.MinEndpointsPerZone, "topology-min-endpoints-per-zone", s.Topology.MinEndpointsPerZone, "ready endpoints per zone needed to turn hints on (they turn off below 2 per zone)")
	o.mcs.BindFlags(fs)
	fs.BoolVar(&o.brokerOptional, "broker-kubeconfig-optional", false,
		"run without multi-cluster services while --broker-kubeconfig does not exist (a member not joined to a ClusterSet yet)")
	fs.StringVar(&o.kubeContext, "context", "", "kubeconfig context to use (default: the current context)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the metrics endpoint binds to (0 disables it)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health and readiness probes bind to")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address Go's pprof profiles are served on, e.g. 127.0.0.1:6060 (0 disables them)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader so only one manager replica reconciles at a time")
	fs.DurationVar(&o.leaderLease, "leader-elect-lease-duration", 15*time.Second, "how long a standby replica waits after the leader's last renewal before it takes over")
	fs.DurationVar(&o.leaderRenew, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it steps down")
	fs.DurationVar(&o.leaderRetry, "leader-elect-retry-period", 2*time.Second, "how often replicas try to acquire or renew the leader election Lease")
	fs.StringVar(&o.leaderNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the manager's own namespace when it runs in a cluster)")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	return o
}

// complete derives what one flag decides for two controllers and validates everything once;
// notJoined says the broker kubeconfig is optional and missing, so multi-cluster services are
// off until it exists.
func (o *options) complete() (notJoined bool, err error) {
	// One bound for both levels: zones inside a cluster and clusters in the ClusterSet.
	o.mcs.Locality = locality.ForThreshold(o.slices.Topology.OverloadThreshold)
	if o.brokerOptional && o.mcs.BrokerKubeconfig != "" {
		if _, err := os.Stat(o.mcs.BrokerKubeconfig); errors.Is(err, fs.ErrNotExist) {
			o.mcs.BrokerKubeconfig, notJoined = "", true
		}
	}
	if err := o.slices.Validate(); err != nil {
		return notJoined, fmt.Errorf("invalid EndpointSlice controller flags: %w", err)
	}
	if !o.mcs.Enabled() {
		return notJoined, nil
	}
	if err := o.mcs.Validate(); err != nil {
		return notJoined, fmt.Errorf("invalid multi-cluster flags: %w", err)
	}
	if o.leaderElect {
		if err := o.mcs.ValidateLeaderElection(o.leaderLease, o.leaderRetry); err != nil {
			return notJoined, fmt.Errorf("invalid leader election flags: %w", err)
		}
	}
	return notJoined, nil
}
