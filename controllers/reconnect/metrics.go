package reconnect

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// waits counts the lists and watches that found their API server unreachable and waited at its
// gate instead of failing: each is a reflector back-off avoided, and their rise says when a
// manager's caches lost the server.
var waits = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleetslice_reconnect_waits_total",
	Help: "Lists and watches that found their API server unreachable and waited for it to answer again, by server (member or broker).",
}, []string{"server"})

func init() { metrics.Registry.MustRegister(waits) }
