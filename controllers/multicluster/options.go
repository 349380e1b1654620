// Package multicluster runs fleetslice's multi-cluster services controllers (KEP-1645) in one
// member cluster of a ClusterSet. The member publishes its ServiceExports to a broker (a
// namespace in any Kubernetes API server, prepared by package broker) as ServiceExportRecords
// and EndpointSlice copies, renews a Lease there, and materialises every ServiceImport of the
// ClusterSet locally from what all live members published:
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
	"fmt"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/controllers/multicluster/broker"
)

// Defaults of Options.
const (
	DefaultLeaseDuration           = 30 * time.Second
	DefaultMaxConcurrentReconciles = 4
	DefaultBrokerWriteTimeout      = 15 * time.Second
	DefaultMaxRetryDelay           = 10 * time.Second
	DefaultLeaveTimeout            = 15 * time.Second
)

// Options configure the multi-cluster controllers of one member.
type Options struct {
	// ClusterID is this member's id when the ClusterProperty cluster.clusterset.k8s.io does not
	// exist. When both exist they must agree.
	ClusterID string
	// BrokerConfig reaches the broker as this member's own identity (see broker.Prepare).
	BrokerConfig *rest.Config
	// BrokerNamespace is the ClusterSet's namespace in the broker; default broker.DefaultNamespace.
	BrokerNamespace string
	// LeaseDuration is how long this member's Lease vouches for it after each renewal. Peers
	// withdraw this member's endpoints once it has lapsed. Default 30s.
	LeaseDuration time.Duration
	// RenewInterval is how often the Lease is renewed; default a third of LeaseDuration.
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
	// MaxRetryDelay caps the back-off of failing reconciles, so that work resumes soon after a
	// broker outage ends; default 10s.
	MaxRetryDelay time.Duration
}

func (o Options) withDefaults() Options {
	if o.BrokerNamespace == "" {
		o.BrokerNamespace = broker.DefaultNamespace
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.LeaseDuration / 3
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if o.BrokerWriteTimeout == 0 {
		o.BrokerWriteTimeout = DefaultBrokerWriteTimeout
	}
	if o.MaxRetryDelay == 0 {
		o.MaxRetryDelay = DefaultMaxRetryDelay
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.BrokerConfig == nil {
		errs = append(errs, errors.New("no broker config given"))
	}
	if o.LeaseDuration < time.Second {
		errs = append(errs, fmt.Errorf("lease duration %s is shorter than the Lease API's one-second resolution", o.LeaseDuration))
	}
	if o.RenewInterval <= 0 || o.RenewInterval >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("renew interval %s must be positive and shorter than the lease duration %s", o.RenewInterval, o.LeaseDuration))
	}
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("max concurrent reconciles %d must be at least 1", o.MaxConcurrentReconciles))
	}
	return errors.Join(errs...)
}
