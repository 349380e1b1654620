// Package multicluster runs fleetslice's multi-cluster services controllers (KEP-1645) in one
// member cluster of a ClusterSet. The member publishes its ServiceExports to a broker (a
// namespace in any Kubernetes API server, prepared by tooling such as `fleetslice up` or
// config/broker) as ServiceExportRecords and EndpointSlice copies, renews a Lease there, and
// materialises every ServiceImport of the ClusterSet locally from what all live members
// published:
//
//   - the export controller validates each ServiceExport, publishes its record and slice
//     copies, and sets Valid, Ready and Conflict (the merge over all live members' records);
//   - the import controller writes each ServiceImport, its derived ClusterIP Service (whose
//     cluster IPs are the ServiceImport's spec.ips) and one imported EndpointSlice per source
//     slice, this cluster's own included;
//   - the membership controller judges peers' Leases (package liveness) and tells both
//     controllers when a member is lost or comes back.
//
// Decisions live in the pure packages merge, liveness, sliceplan and importplan.
package multicluster

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/reconnect"
)

// Defaults of Options.
const (
	DefaultLeaseDuration           = 30 * time.Second
	DefaultMaxConcurrentReconciles = 4
	DefaultBrokerWriteTimeout      = 15 * time.Second
	DefaultMaxRetryDelay           = 10 * time.Second
	DefaultLeaveTimeout            = 15 * time.Second
	// DefaultBrokerQPS and DefaultBrokerBurst limit one member's requests to the broker. A bulk
	// sync (a member joining, every manager restarting after an upgrade) writes two objects per
	// export there; see docs/multicluster.md for the measurements behind these values.
	DefaultBrokerQPS   float32 = 200
	DefaultBrokerBurst         = 400
	// DefaultCredentialsWarning is how long before the broker credentials expire the manager
	// starts warning; DefaultCredentialsCheckInterval how often it looks (for a renewed
	// kubeconfig file, and at the clock).
	DefaultCredentialsWarning       = 30 * 24 * time.Hour
	DefaultCredentialsCheckInterval = time.Minute
	// DefaultInitialExportsWait bounds how long new imports wait for members still publishing
	// the exports they started with: about what a member with 10,000 exports takes to publish
	// them at the default broker QPS.
	DefaultInitialExportsWait = 2 * time.Minute
	// DefaultReconnectProbeInterval is how often a member asks a broker that stopped answering
	// whether it answers again.
	DefaultReconnectProbeInterval = reconnect.DefaultProbeInterval
)

// Options configure the multi-cluster controllers of one member.
type Options struct {
	// ClusterID is this member's id when the ClusterProperty cluster.clusterset.k8s.io does not
	// exist. When both exist they must agree.
	ClusterID string
	// BrokerConfig reaches the broker as this member's own identity.
	BrokerConfig *rest.Config
	// BrokerKubeconfig is a path to such a kubeconfig, read when BrokerConfig is nil.
	BrokerKubeconfig string
	// BrokerNamespace is the ClusterSet's namespace in the broker; default DefaultNamespace.
	BrokerNamespace string
	// LeaseDuration is how long this member's Lease vouches for it after each renewal. Peers
	// withdraw this member's endpoints once it has lapsed. Default 30s.
	LeaseDuration time.Duration
	// RenewInterval is how often the Lease is renewed; 0 renews every third of LeaseDuration,
	// so that a longer lease alone also renews less often.
	RenewInterval time.Duration
	// LeaveOnShutdown deletes this member's records, slice copies and Lease from the broker
	// when the manager stops, so peers drop its endpoints at once instead of after the lease
	// lapses. Leave it off for restarts and upgrades.
	LeaveOnShutdown bool
	// MaxConcurrentReconciles per controller; default 4.
	MaxConcurrentReconciles int
	// BrokerWriteTimeout bounds each broker write, so an unreachable broker fails a reconcile
	// instead of holding a worker; default 15s.
	BrokerWriteTimeout time.Duration
	// BrokerQPS and BrokerBurst limit this member's requests to the broker (below 0: no limit);
	// defaults DefaultBrokerQPS and DefaultBrokerBurst. The Lease renewer has a limiter of its
	// own, so a bulk sync never delays a renewal.
	BrokerQPS   float32
	BrokerBurst int
	// BrokerOutageGrace is how long publishing may fail transiently (the broker unreachable,
	// timing out or overloaded) before an export whose change it holds back turns Ready=False
	// Pending with one BrokerWriteFailed event; until then failures are retried with back-off
	// and shown only by the renewer's log and the broker_reachable metric. Refusals (forbidden,
	// invalid) are reported at once, and so is every failure with 0. DefaultOptions sets
	// DefaultBrokerOutageGrace.
	BrokerOutageGrace time.Duration
	// ReconnectProbeInterval is how often, while the broker does not answer, a member asks it
	// whether it answers again, so that its broker cache resumes at once when it does (see
	// package reconnect); 0 means DefaultReconnectProbeInterval.
	ReconnectProbeInterval time.Duration
	// MaxRetryDelay caps the back-off of failing reconciles, so that work resumes soon after a
	// broker outage ends; default 10s.
	MaxRetryDelay time.Duration
	// Locality bounds the allocation of PreferSameCluster Services across clusters. The
	// manager derives it from the zone hints' --topology-overload-threshold
	// (locality.ForThreshold), so both levels keep one promise.
	Locality locality.Options
	// ClusterSelection is how Services with cluster selectors (KEP-5939) follow their tiers:
	// locality.SelectionBounded (default) keeps each tier within the overload bound and spills
	// the least to the next; locality.SelectionFirstReady is the KEP's default, the first tier
	// with a ready endpoint whatever it can carry.
	ClusterSelection locality.Selection
	// CredentialsWarning is how long before the broker credentials expire a Warning event says
	// so; default 30 days. CredentialsCheckInterval is how often the kubeconfig file is re-read
	// for a renewed token and the expiry judged; default a minute.
	CredentialsWarning       time.Duration
	CredentialsCheckInterval time.Duration
	// InitialExportsWait bounds how long new imports wait, when members start, for every live
	// member to publish the exports it had at start, so that each import is created once with
	// all its exporting clusters. This member announces its own first publication for as long.
	// 0 waits for nothing and announces nothing; default DefaultInitialExportsWait.
	InitialExportsWait time.Duration
}

// DefaultOptions returns the options every flag defaults to, without a broker.
func DefaultOptions() Options {
	return Options{
		BrokerNamespace:          DefaultNamespace,
		LeaseDuration:            DefaultLeaseDuration,
		MaxConcurrentReconciles:  DefaultMaxConcurrentReconciles,
		BrokerWriteTimeout:       DefaultBrokerWriteTimeout,
		BrokerQPS:                DefaultBrokerQPS,
		BrokerBurst:              DefaultBrokerBurst,
		MaxRetryDelay:            DefaultMaxRetryDelay,
		BrokerOutageGrace:        DefaultBrokerOutageGrace,
		ReconnectProbeInterval:   DefaultReconnectProbeInterval,
		Locality:                 locality.DefaultOptions(),
		ClusterSelection:         locality.SelectionBounded,
		CredentialsWarning:       DefaultCredentialsWarning,
		CredentialsCheckInterval: DefaultCredentialsCheckInterval,
		InitialExportsWait:       DefaultInitialExportsWait,
	}
}

// BindFlags registers the manager flags for these options on fs, each defaulting to the value
// o holds (normally DefaultOptions). The broker is given by --broker-kubeconfig; Enabled
// reports whether it was.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.ClusterID, "cluster-id", o.ClusterID,
		"this member's ClusterSet id, used when the ClusterProperty cluster.clusterset.k8s.io does not exist")
	fs.StringVar(&o.BrokerKubeconfig, "broker-kubeconfig", o.BrokerKubeconfig,
		"kubeconfig of this member's broker identity; empty disables multi-cluster services")
	fs.StringVar(&o.BrokerNamespace, "broker-namespace", o.BrokerNamespace, "the ClusterSet's namespace in the broker")
	fs.DurationVar(&o.LeaseDuration, "cluster-lease-duration", o.LeaseDuration,
		"how long this member's broker Lease vouches for it; peers withdraw its endpoints once it lapses")
	fs.DurationVar(&o.RenewInterval, "cluster-lease-renew-interval", o.RenewInterval, "how often the Lease is renewed (0: every third of the lease duration)")
	fs.BoolVar(&o.LeaveOnShutdown, "leave-on-shutdown", o.LeaveOnShutdown,
		"delete this member's records and Lease from the broker when the manager stops (for decommissioning, not restarts)")
	fs.Func("broker-api-qps", fmt.Sprintf("requests per second to the broker's API server (below 0: no limit; default %v); the Lease renewer has its own limit", o.BrokerQPS),
		func(s string) error {
			v, err := strconv.ParseFloat(s, 32)
			o.BrokerQPS = float32(v)
			return err
		})
	fs.IntVar(&o.BrokerBurst, "broker-api-burst", o.BrokerBurst, "burst of requests to the broker's API server above --broker-api-qps")
	fs.DurationVar(&o.CredentialsWarning, "broker-credentials-warning", o.CredentialsWarning,
		"warn (a Warning event on the ClusterProperty clusterset.k8s.io) this long before the broker credentials expire")
	fs.DurationVar(&o.CredentialsCheckInterval, "broker-credentials-check-interval", o.CredentialsCheckInterval,
		"how often the broker kubeconfig is re-read for a renewed token and its expiry judged")
	fs.DurationVar(&o.BrokerOutageGrace, "broker-outage-grace", o.BrokerOutageGrace,
		"how long publishing may fail because the broker is unreachable, timing out or overloaded before the exports it holds back turn Ready=False with a BrokerWriteFailed event (0: at once); refusals are reported at once")
	fs.DurationVar(&o.ReconnectProbeInterval, "broker-reconnect-probe-interval", o.ReconnectProbeInterval,
		"how often a broker that stopped answering is asked whether it answers again; the broker cache resumes listing and watching at the first answer")
	fs.DurationVar(&o.InitialExportsWait, "initial-exports-wait", o.InitialExportsWait,
		"how long new imports wait for members that are still publishing the exports they started with, so that each is created once with all its exporters (0: no wait)")
	fs.IntVar(&o.MaxConcurrentReconciles, "multicluster-concurrent-reconciles", o.MaxConcurrentReconciles,
		"workers of each multi-cluster controller")
	fs.Func("cluster-selection", fmt.Sprintf("how Services with cluster selectors (annotation %s, KEP-5939) follow their tiers: "+
		"%s (each tier keeps what its endpoints carry within --topology-overload-threshold and spills the least to the next) or "+
		"%s (the KEP's default: the first tier with a ready endpoint takes all, whatever it can carry) (default %s)",
		v1alpha1.AnnotationClusterSelectors, locality.SelectionBounded, locality.SelectionFirstReady, o.ClusterSelection),
		func(s string) error {
			o.ClusterSelection = locality.Selection(s)
			return o.ClusterSelection.Validate()
		})
}

// Enabled reports whether a broker is configured.
func (o Options) Enabled() bool {
	return o.BrokerConfig != nil || o.BrokerKubeconfig != ""
}

// renewEvery is how often the Lease is renewed.
func (o Options) renewEvery() time.Duration {
	if o.RenewInterval == 0 {
		return o.LeaseDuration / 3
	}
	return o.RenewInterval
}

// Validate rejects options the controllers cannot run with, naming each problem.
func (o Options) Validate() error {
	var errs []error
	if !o.Enabled() {
		errs = append(errs, errors.New("no broker config given"))
	}
	if o.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("lease duration %s is shorter than the Lease API's one-second resolution", o.LeaseDuration))
	}
	if every := o.renewEvery(); every <= 0 || every >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("renew interval %s must be positive and shorter than the lease duration %s", every, o.LeaseDuration))
	}
	if o.BrokerNamespace == "" {
		errs = append(errs, errors.New("the broker namespace must not be empty"))
	}
	if o.BrokerWriteTimeout <= 0 || o.MaxRetryDelay <= 0 {
		errs = append(errs, fmt.Errorf("broker write timeout %s and max retry delay %s must be positive", o.BrokerWriteTimeout, o.MaxRetryDelay))
	}
	if o.BrokerQPS == 0 {
		errs = append(errs, errors.New("broker QPS 0 would send no request; below 0 means no limit"))
	}
	if err := o.Locality.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.ClusterSelection.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--cluster-selection: %w", err))
	}
	if o.BrokerQPS > 0 && o.BrokerBurst < 1 {
		errs = append(errs, fmt.Errorf("broker burst %d must be at least 1 when the broker QPS (%v) is limited", o.BrokerBurst, o.BrokerQPS))
	}
	if o.CredentialsWarning < 0 || o.CredentialsCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("broker credentials warning %s and check interval %s must not be negative", o.CredentialsWarning, o.CredentialsCheckInterval))
	}
	if o.BrokerOutageGrace < 0 || o.ReconnectProbeInterval < 0 {
		errs = append(errs, fmt.Errorf("broker outage grace %s and reconnect probe interval %s must not be negative", o.BrokerOutageGrace, o.ReconnectProbeInterval))
	}
	if o.InitialExportsWait < 0 {
		errs = append(errs, fmt.Errorf("initial exports wait %s must not be negative", o.InitialExportsWait))
	}
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("max concurrent reconciles %d must be at least 1", o.MaxConcurrentReconciles))
	}
	return errors.Join(errs...)
}

// LeaderHandOver is how long a member's broker Lease can go unrenewed when its leading manager
// replica dies: up to a renew interval since the last renewal, then the leader election Lease
// running out and a retry period on each side before the standby leads and renews.
func (o Options) LeaderHandOver(leaderLease, retryPeriod time.Duration) time.Duration {
	return o.renewEvery() + leaderLease + 2*retryPeriod
}

// ValidateLeaderElection refuses leader election timings under which peers would judge this
// cluster lost, and withdraw all its endpoints, every time its leader changes.
func (o Options) ValidateLeaderElection(leaderLease, retryPeriod time.Duration) error {
	if gap := o.LeaderHandOver(leaderLease, retryPeriod); gap >= o.LeaseDuration {
		return fmt.Errorf("a leader hand-over can leave the cluster Lease unrenewed for %s (renew interval %s + leader election lease %s + 2 × retry period %s), "+
			"not less than --cluster-lease-duration %s: peers would withdraw this cluster's endpoints whenever its leader changes; "+
			"lengthen --cluster-lease-duration or shorten --leader-elect-lease-duration and --leader-elect-retry-period",
			gap.Round(time.Millisecond), o.renewEvery().Round(time.Millisecond), leaderLease, retryPeriod, o.LeaseDuration)
	}
	return nil
}
