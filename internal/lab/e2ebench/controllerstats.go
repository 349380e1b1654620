package e2ebench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ControllerStats are one EndpointSlice controller's own counters over a phase, from its metrics
// endpoint: they say why it wrote what the API server counted.
type ControllerStats struct {
	// Syncs ran (successful, failed or stale); Stale of them found the cache behind their own
	// writes and retried.
	Syncs, Stale float64
	// Unchanged syncs wrote nothing (fleetslice only: upstream does not tell; -1 when unknown).
	Unchanged float64
	// Queued counts the Service syncs asked for: fleetslice's Pod changes that mattered, upstream's
	// additions to its Service queue (Pod, Service and slice events, retries).
	Queued float64
	// Deferred counts syncs woken early that waited for a burst to settle (fleetslice only).
	Deferred float64
	// SlicesChanged is the sum of slices written per sync.
	SlicesChanged float64
	// LimiterWait is the time requests spent waiting for the client-side rate limiter, over
	// LimitedRequests requests: fleetslice's member client; for kube-controller-manager every
	// controller in the process (it does not tell them apart).
	LimiterWait     time.Duration
	LimitedRequests float64
	// WorkTime is the time the controller's workers spent on its queue's items: over Syncs, how
	// long a sync takes (fleetslice's early wake-ups among them take next to nothing). It is the
	// load fleetslice's coalescing window adapts to.
	WorkTime time.Duration
}

// statsQuery says where each ControllerStats field comes from in one controller's exposition.
type statsQuery struct {
	syncs, stale, unchanged, queued, deferred, slicesChanged, limiterSum, limiterCount, workSum selector
}

// selector picks the series of one metric whose labels match.
type selector struct {
	name   string
	labels map[string]string
}

var (
	fleetsliceStats = statsQuery{
		syncs:         selector{name: "fleetslice_endpointslice_syncs_total"},
		stale:         selector{name: "fleetslice_endpointslice_syncs_total", labels: map[string]string{"result": "stale"}},
		unchanged:     selector{name: "fleetslice_endpointslice_syncs_unchanged_total"},
		queued:        selector{name: "fleetslice_endpointslice_pod_changes_total"},
		deferred:      selector{name: "fleetslice_endpointslice_syncs_deferred_total"},
		slicesChanged: selector{name: "fleetslice_endpointslice_endpointslices_changed_per_sync_sum"},
		limiterSum:    selector{name: "fleetslice_rest_client_rate_limiter_wait_seconds_sum", labels: map[string]string{"client": "member"}},
		limiterCount:  selector{name: "fleetslice_rest_client_rate_limiter_wait_seconds_count", labels: map[string]string{"client": "member"}},
		workSum:       selector{name: "workqueue_work_duration_seconds_sum", labels: map[string]string{"name": "endpointslice"}},
	}
	upstreamStats = statsQuery{
		syncs:         selector{name: "endpoint_slice_controller_syncs"},
		stale:         selector{name: "endpoint_slice_controller_syncs", labels: map[string]string{"result": "stale"}},
		queued:        selector{name: "workqueue_adds_total", labels: map[string]string{"name": "endpoint_slice"}},
		slicesChanged: selector{name: "endpoint_slice_controller_endpointslices_changed_per_sync_sum"},
		limiterSum:    selector{name: "rest_client_rate_limiter_duration_seconds_sum"},
		limiterCount:  selector{name: "rest_client_rate_limiter_duration_seconds_count"},
		workSum:       selector{name: "workqueue_work_duration_seconds_sum", labels: map[string]string{"name": "endpoint_slice"}},
	}
)

// statsSource reads one controller's metrics endpoint.
type statsSource struct {
	url   string
	query statsQuery
}

func (s statsSource) read(ctx context.Context) (ControllerStats, error) {
	series, err := scrape(ctx, s.url)
	if err != nil {
		return ControllerStats{}, err
	}
	q := s.query
	out := ControllerStats{
		Syncs: series.sum(q.syncs), Stale: series.sum(q.stale), Queued: series.sum(q.queued),
		Deferred: series.sum(q.deferred), SlicesChanged: series.sum(q.slicesChanged),
		LimiterWait:     time.Duration(series.sum(q.limiterSum) * float64(time.Second)),
		LimitedRequests: series.sum(q.limiterCount), Unchanged: -1,
		WorkTime: time.Duration(series.sum(q.workSum) * float64(time.Second)),
	}
	if q.unchanged.name != "" {
		out.Unchanged = series.sum(q.unchanged)
	}
	return out, nil
}

// Sub returns the counters' growth from before to s.
func (s ControllerStats) Sub(before ControllerStats) ControllerStats {
	out := s.plus(before, -1)
	if s.Unchanged >= 0 {
		out.Unchanged = s.Unchanged - before.Unchanged
	}
	return out
}

// Add returns the counters of s and o together, as over two phases; the zero value starts a sum.
func (s ControllerStats) Add(o ControllerStats) ControllerStats {
	out := s.plus(o, 1)
	if o.Unchanged >= 0 {
		out.Unchanged = max(s.Unchanged, 0) + o.Unchanged
	}
	return out
}

// plus is s + k*o for every counter but Unchanged, which it leaves unknown for the caller.
func (s ControllerStats) plus(o ControllerStats, k float64) ControllerStats {
	return ControllerStats{
		Syncs: s.Syncs + k*o.Syncs, Stale: s.Stale + k*o.Stale, Queued: s.Queued + k*o.Queued,
		Deferred: s.Deferred + k*o.Deferred, SlicesChanged: s.SlicesChanged + k*o.SlicesChanged,
		LimiterWait: s.LimiterWait + time.Duration(k*float64(o.LimiterWait)), LimitedRequests: s.LimitedRequests + k*o.LimitedRequests,
		WorkTime: s.WorkTime + time.Duration(k*float64(o.WorkTime)), Unchanged: -1,
	}
}

// exposition is every sample of a scrape, by metric name (histograms and summaries split into
// their _sum and _count series).
type exposition map[string][]sample

type sample struct {
	labels map[string]string
	value  float64
}

func (e exposition) sum(sel selector) float64 {
	total := 0.0
	for _, s := range e[sel.name] {
		if matches(s.labels, sel.labels) {
			total += s.value
		}
	}
	return total
}

func matches(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The controllers serve metrics on loopback, kube-controller-manager with its own self-signed
// certificate; nothing secret travels.
var metricsClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback, self-signed
}

func scrape(ctx context.Context, url string) (exposition, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading %s: status %s, %v", url, resp.Status, err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	out := exposition{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = append(out[name], sample{labels, m.GetCounter().GetValue()})
			case dto.MetricType_GAUGE:
				out[name] = append(out[name], sample{labels, m.GetGauge().GetValue()})
			case dto.MetricType_HISTOGRAM:
				out[name+"_sum"] = append(out[name+"_sum"], sample{labels, m.GetHistogram().GetSampleSum()})
				out[name+"_count"] = append(out[name+"_count"], sample{labels, float64(m.GetHistogram().GetSampleCount())})
			case dto.MetricType_UNTYPED:
				out[name] = append(out[name], sample{labels, m.GetUntyped().GetValue()})
			}
		}
	}
	return out, nil
}

// WaitForMetrics waits until a controller's metrics endpoint answers: a manager just started
// serves it a moment later.
func WaitForMetrics(ctx context.Context, url string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		_, last = scrape(ctx, url)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not answer: %w (last: %v)", url, err, last)
	}
	return nil
}

var securePort = regexp.MustCompile(`--secure-port=(\d+)`)

// controllerManagerMetricsURL is where a cluster's kube-controller-manager serves /metrics:
// kwokctl starts it with /metrics open to anyone, on the secure port its command line names.
func controllerManagerMetricsURL(pid int) (string, error) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", err
	}
	m := securePort.FindSubmatch(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	if m == nil {
		return "", fmt.Errorf("kube-controller-manager (pid %d) has no --secure-port", pid)
	}
	return fmt.Sprintf("https://127.0.0.1:%s/metrics", m[1]), nil
}
