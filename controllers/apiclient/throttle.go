// Package apiclient sets the client-side request limits of the manager's API clients, as
// kube-controller-manager's --kube-api-qps and --kube-api-burst do, and measures how long requests
// wait for them: a controller stuck behind its own rate limiter writes late, and that wait is
// otherwise invisible.
package apiclient

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Defaults for the member cluster's client (docs/operations.md). Ordinary churn stays far below
// them: a 1,000-Pod rollout with coalescing writes under 50 per second (endpointslice-e2e bench).
// What they shape is a bulk sync, and the multicluster bench's is the largest: importing 1,000
// Services from 3 clusters is about 10,000 writes to the member, which at the former 50 per
// second took over three minutes on the client's account alone. At 500 the client's own floor
// for it is under 20 seconds; beyond that the API server's Priority and Fairness decides.
const (
	DefaultQPS   float32 = 500
	DefaultBurst         = 1000
)

var rateLimiterWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "fleetslice_rest_client_rate_limiter_wait_seconds",
	Help:    "Time requests waited for the client-side rate limiter, by client",
	Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60},
}, []string{"client"})

func init() {
	metrics.Registry.MustRegister(rateLimiterWait)
}

// Throttle limits cfg's requests to qps per second with bursts of burst, and records each
// request's wait under the client's name. qps below 0 lifts the limit.
func Throttle(cfg *rest.Config, client string, qps float32, burst int) error {
	if qps == 0 || (qps > 0 && burst < 1) {
		return fmt.Errorf("%s client: qps must be above 0 (or below 0 for no limit) and burst at least 1, got qps %v burst %d", client, qps, burst)
	}
	cfg.QPS, cfg.Burst = qps, burst
	if qps < 0 {
		// client-go makes no limiter for a negative QPS.
		cfg.RateLimiter = nil
		return nil
	}
	cfg.RateLimiter = &measured{RateLimiter: flowcontrol.NewTokenBucketRateLimiter(qps, burst), wait: rateLimiterWait.WithLabelValues(client)}
	return nil
}

// measured times every wait of the limiter it wraps.
type measured struct {
	flowcontrol.RateLimiter
	wait prometheus.Observer
}

func (m *measured) Wait(ctx context.Context) error {
	start := time.Now()
	err := m.RateLimiter.Wait(ctx)
	m.wait.Observe(time.Since(start).Seconds())
	return err
}

func (m *measured) Accept() {
	start := time.Now()
	m.RateLimiter.Accept()
	m.wait.Observe(time.Since(start).Seconds())
}

// ForOwnCluster readies cfg for the API server of the cluster the process runs in: responses
// uncompressed, as kube-controller-manager and kube-scheduler ask for theirs (kubernetes PR
// 80919). On a cluster's own network gzip costs CPU at both ends and saves nothing worth it, and
// since Kubernetes 1.37 (WatchListCompression) an informer's watch is compressed for its whole
// life, every event flushed through gzip once per watcher: a member's API server spent about 3%
// of its CPU there while a member joined a ClusterSet, and the manager as much again reading it.
// The broker's client keeps what its kubeconfig says (`disable-compression`), since a broker is
// often in another region, where bytes cost more than CPU.
func ForOwnCluster(cfg *rest.Config) {
	cfg.DisableCompression = true
}
