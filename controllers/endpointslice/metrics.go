package endpointslice

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
)

// Metrics keep upstream's names (subsystem endpoint_slice_controller) and labels under our own
// prefix, so dashboards built for kube-controller-manager carry over by swapping the prefix;
// counters end in _total, as Prometheus names counters (upstream's changes and syncs do not).
const metricsPrefix = "fleetslice_endpointslice_"

// Values of the syncs counter's result label, upstream's.
const (
	syncSuccess = "success"
	syncError   = "error"
	// syncStale is a sync that found the cache behind this controller's own writes and retries.
	syncStale = "stale"
	// syncInvalid is a sync that kept a Service's slices because its input does not parse.
	syncInvalid = "invalid"
)

// topologyLabel is the topology label of endpointslices_changed_per_sync, upstream's values:
// Auto for CPU-proportional hints, Disabled otherwise (trafficDistribution has its own label).
func topologyLabel(mode hints.Mode) string {
	if mode == hints.Auto {
		return "Auto"
	}
	return "Disabled"
}

var (
	endpointsAddedPerSync = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricsPrefix + "endpoints_added_per_sync",
		Help:    "Number of endpoints added on each Service sync",
		Buckets: prometheus.ExponentialBuckets(2, 2, 15),
	}, []string{})
	endpointsRemovedPerSync = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricsPrefix + "endpoints_removed_per_sync",
		Help:    "Number of endpoints removed on each Service sync",
		Buckets: prometheus.ExponentialBuckets(2, 2, 15),
	}, []string{})
	endpointSlicesChangedPerSync = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    metricsPrefix + "endpointslices_changed_per_sync",
		Help:    "Number of EndpointSlices changed on each Service sync",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"topology", "traffic_distribution"})
	endpointsDesired = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "endpoints_desired",
		Help: "Number of endpoints desired across all Services",
	}, []string{})
	numEndpointSlices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "num_endpoint_slices",
		Help: "Number of EndpointSlices this controller manages",
	}, []string{})
	desiredEndpointSlices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "desired_endpoint_slices",
		Help: "Number of EndpointSlices that would exist with perfect endpoint allocation",
	}, []string{})
	endpointSliceChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "changes_total",
		Help: "Number of EndpointSlice changes",
	}, []string{"operation"})
	topologyHintChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "topology_hint_changes_total",
		Help: "Number of endpoints whose topology hints were rewritten, by topology mode",
	}, []string{"mode"})
	servicesByTopologyMode = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "services",
		Help: "Number of Services this controller syncs, by topology mode",
	}, []string{"topology_mode"})
	servicesByTrafficDistribution = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "services_count_by_traffic_distribution",
		Help: "Number of Services this controller syncs whose trafficDistribution it honours, by its value",
	}, []string{"traffic_distribution"})
	endpointSliceSyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "syncs_total",
		Help: "Number of EndpointSlice syncs",
	}, []string{"result"})
	syncsDeferred = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "syncs_deferred_total",
		Help: "Number of times a Service's sync was woken early and waited for its burst of Pod changes to settle",
	})
	syncsUnchanged = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "syncs_unchanged_total",
		Help: "Number of successful syncs that found every EndpointSlice already as desired and wrote nothing",
	})
	podChangesQueued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "pod_changes_total",
		Help: "Number of Pod changes that queued a Service sync (one per Service a changed Pod is selected by)",
	})
)

func init() {
	metrics.Registry.MustRegister(endpointsAddedPerSync, endpointsRemovedPerSync, endpointSlicesChangedPerSync,
		endpointsDesired, numEndpointSlices, desiredEndpointSlices, endpointSliceChanges, endpointSliceSyncs,
		topologyHintChanges, servicesByTopologyMode, servicesByTrafficDistribution, syncsDeferred, syncsUnchanged, podChangesQueued)
}

// serviceTotals keeps each Service's contribution to the cluster-wide gauges, so a sync updates
// the gauges by the difference instead of summing over every Service.
type serviceTotals struct {
	mu                           sync.Mutex
	perService                   map[types.NamespacedName]efficiency
	desired, slices, idealSlices int
}

type efficiency struct {
	// desired endpoints, slices in use and the ceil(desired/max) slices a perfect packing needs.
	desired, slices, idealSlices int
	// mode is the Service's topology mode; trafficDistribution is its spec.trafficDistribution
	// when this controller honours it, else empty (upstream's traffic_distribution label).
	mode                hints.Mode
	trafficDistribution string
}

func (t *serviceTotals) set(service types.NamespacedName, e efficiency) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.perService == nil {
		t.perService = map[types.NamespacedName]efficiency{}
	}
	old, had := t.perService[service]
	t.perService[service] = e
	if had {
		old.countService(-1)
	}
	e.countService(1)
	t.desired += e.desired - old.desired
	t.slices += e.slices - old.slices
	t.idealSlices += e.idealSlices - old.idealSlices
	t.publish()
}

func (t *serviceTotals) forget(service types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.perService[service]
	if !ok {
		return
	}
	delete(t.perService, service)
	old.countService(-1)
	t.desired -= old.desired
	t.slices -= old.slices
	t.idealSlices -= old.idealSlices
	t.publish()
}

func (t *serviceTotals) publish() {
	endpointsDesired.WithLabelValues().Set(float64(t.desired))
	numEndpointSlices.WithLabelValues().Set(float64(t.slices))
	desiredEndpointSlices.WithLabelValues().Set(float64(t.idealSlices))
}

// countService adds delta to the per-Service gauges this Service's labels select.
func (e efficiency) countService(delta float64) {
	servicesByTopologyMode.WithLabelValues(string(e.mode)).Add(delta)
	if e.trafficDistribution != "" {
		servicesByTrafficDistribution.WithLabelValues(e.trafficDistribution).Add(delta)
	}
}
