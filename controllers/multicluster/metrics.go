package multicluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

const metricsPrefix = "fleetslice_multicluster_"

var (
	brokerWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "broker_writes_total",
		Help: "Writes to the broker by kind (record, endpointslice, lease), operation and result.",
	}, []string{"kind", "operation", "result"})
	localWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "local_writes_total",
		Help: "Writes to the member cluster by kind (serviceimport, service, endpointslice, serviceexport-status), operation and result.",
	}, []string{"kind", "operation", "result"})
	leaseRenewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "lease_renewals_total",
		Help: "Renewals of this member's broker Lease by result.",
	}, []string{"member", "result"})
	clusterLive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "cluster_live",
		Help: "1 while a peer's Lease vouches for it in this member's view, 0 once it is lost.",
	}, []string{"member", "cluster"})
	clusterTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "cluster_transitions_total",
		Help: "Peers judged lost or live again, by peer and new state.",
	}, []string{"member", "cluster", "state"})
	brokerReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "broker_reachable",
		Help: "1 while this member's last Lease renewal reached the broker, 0 while renewals fail.",
	}, []string{"member"})
	importedEndpointSlices = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "imported_endpointslice_changes_total",
		Help: "Imported EndpointSlices created, updated and deleted; failed writes count only in local_writes_total.",
	}, []string{"operation"})
)

func init() {
	metrics.Registry.MustRegister(brokerWrites, localWrites, leaseRenewals, clusterLive, clusterTransitions, brokerReachable, importedEndpointSlices)
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
