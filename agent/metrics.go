package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// Metrics keep kube-proxy's names under our own prefix, so dashboards built
// for kube-proxy carry over by swapping "kubeproxy_" for "fleetslice_agent_".
const metricsPrefix = "fleetslice_agent_"

// Sync modes and results, as label values.
const (
	ModeFull      = "full"
	ModePartial   = "partial"
	ResultSuccess = "success"
	ResultError   = "error"

	// MetricTableDrift counts drift found in the agent's nftables table, by kind.
	MetricTableDrift = metricsPrefix + "sync_proxy_rules_nftables_table_drift_total"

	// Outcomes of a drift check.
	DriftCheckUnchanged = "unchanged" // the ruleset generation had not moved: nothing read
	DriftCheckListed    = "listed"    // the table was read back and compared
	DriftCheckError     = "error"
)

var (
	// kube-proxy's buckets: 1 ms doubling to about 16 s.
	syncBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

	syncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    metricsPrefix + "sync_proxy_rules_duration_seconds",
		Help:    "Time one sync of the Service rules took, conversion and transactions included",
		Buckets: syncBuckets,
	})
	syncFullDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    metricsPrefix + "sync_full_proxy_rules_duration_seconds",
		Help:    "Time one full sync (every Service compared with the kernel's table) of the Service rules took",
		Buckets: syncBuckets,
	})
	syncPartialDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    metricsPrefix + "sync_partial_proxy_rules_duration_seconds",
		Help:    "Time one incremental sync of the Service rules took",
		Buckets: syncBuckets,
	})
	syncTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "sync_proxy_rules_total",
		Help: "Syncs of the Service rules, by mode (full, partial) and result (success, error)",
	}, []string{"mode", "result"})
	nftablesSyncFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "sync_proxy_rules_nftables_sync_failures_total",
		Help: "Syncs whose nftables transaction failed (or nftables could not be opened)",
	})
	lastSyncTimestamp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricsPrefix + "sync_proxy_rules_last_timestamp_seconds",
		Help: "When the Service rules were last synced successfully (Unix seconds)",
	})
	lastQueuedTimestamp = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricsPrefix + "sync_proxy_rules_last_queued_timestamp_seconds",
		Help: "When a change last queued a sync of the Service rules (Unix seconds)",
	})
	networkProgrammingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: metricsPrefix + "network_programming_duration_seconds",
		Help: "Time from an EndpointSlice's last-change-trigger-time to the end of the sync that programmed it",
		// Sub-second detail first, then seconds up to a minute and coarser
		// steps to five minutes, as kube-proxy buckets it.
		Buckets: append(append(append(prometheus.LinearBuckets(0.25, 0.25, 2),
			prometheus.LinearBuckets(1, 1, 59)...),
			prometheus.LinearBuckets(60, 5, 12)...),
			prometheus.LinearBuckets(120, 30, 7)...),
	})
	endpointChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "sync_proxy_rules_endpoint_changes_total",
		Help: "EndpointSlice changes the agent has seen",
	})
	serviceChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "sync_proxy_rules_service_changes_total",
		Help: "Service and ServiceImport changes the agent has seen",
	})
	noLocalEndpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "sync_proxy_rules_no_local_endpoints_total",
		Help: "Services with a Local traffic policy and no endpoint on this node, by policy (internal, external)",
	}, []string{"traffic_policy"})
	servicesProgrammed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricsPrefix + "services",
		Help: "Services programmed by the last successful sync",
	})
	tableDrift = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricTableDrift,
		Help: "Times a drift check found the agent's nftables table changed by someone else, by kind (table-missing, content-changed); each is repaired by a full sync",
	}, []string{"kind"})
	driftChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "sync_proxy_rules_nftables_drift_checks_total",
		Help: "Drift checks of the agent's nftables table, by outcome (unchanged: ruleset generation unmoved, nothing read; listed: table read back and compared; error)",
	}, []string{"outcome"})
	servicesRejected = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricsPrefix + "services_rejected",
		Help: "Services the dataplane refused in the last sync (invalid, or claiming an address another Service holds)",
	})
)

func init() {
	metrics.Registry.MustRegister(syncDuration, syncFullDuration, syncPartialDuration, syncTotal,
		nftablesSyncFailures, lastSyncTimestamp, lastQueuedTimestamp, networkProgrammingDuration,
		endpointChanges, serviceChanges, noLocalEndpoints, servicesProgrammed, servicesRejected,
		tableDrift, driftChecks)
	for _, kind := range []string{dataplane.DriftTableMissing, dataplane.DriftContentChanged} {
		tableDrift.WithLabelValues(kind)
	}
	for _, outcome := range []string{DriftCheckUnchanged, DriftCheckListed, DriftCheckError} {
		driftChecks.WithLabelValues(outcome)
	}
	for _, mode := range []string{ModeFull, ModePartial} {
		for _, result := range []string{ResultSuccess, ResultError} {
			syncTotal.WithLabelValues(mode, result)
		}
	}
}
