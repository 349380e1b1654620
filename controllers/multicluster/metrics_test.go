package multicluster

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricNamesFollowPrometheusConventions: every metric is namespaced, counters and only
// counters end in _total, and names and labels are snake_case, so dashboards and recording
// rules written for Prometheus conventions work unchanged.
func TestMetricNamesFollowPrometheusConventions(t *testing.T) {
	collectors := []prometheus.Collector{brokerWrites, localWrites, leaseRenewals, clusterLive, clusterTransitions, importedEndpointSlices,
		credentialsExpiry, credentialsReloads}
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(collectors...)
	// A vector is gathered only once it has a series; give each one and take it away after.
	touch := func(c interface {
		DeleteLabelValues(...string) bool
	}, labels int, create func(...string)) {
		values := make([]string, labels)
		for i := range values {
			values[i] = "convention-test"
		}
		create(values...)
		t.Cleanup(func() { c.DeleteLabelValues(values...) })
	}
	touch(brokerWrites, 3, func(v ...string) { brokerWrites.WithLabelValues(v...) })
	touch(localWrites, 3, func(v ...string) { localWrites.WithLabelValues(v...) })
	touch(leaseRenewals, 2, func(v ...string) { leaseRenewals.WithLabelValues(v...) })
	touch(clusterLive, 2, func(v ...string) { clusterLive.WithLabelValues(v...) })
	touch(clusterTransitions, 3, func(v ...string) { clusterTransitions.WithLabelValues(v...) })
	touch(importedEndpointSlices, 1, func(v ...string) { importedEndpointSlices.WithLabelValues(v...) })
	touch(credentialsExpiry, 1, func(v ...string) { credentialsExpiry.WithLabelValues(v...) })
	touch(credentialsReloads, 2, func(v ...string) { credentialsReloads.WithLabelValues(v...) })

	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != len(collectors) {
		t.Fatalf("gathered %d metric families, want %d", len(families), len(collectors))
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, metricsPrefix) || !snake.MatchString(name) {
			t.Errorf("%s: want a snake_case name starting with %s", name, metricsPrefix)
		}
		if counter := f.GetType() == dto.MetricType_COUNTER; counter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s (%s): counters, and only counters, end in _total", name, f.GetType())
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", name)
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !snake.MatchString(l.GetName()) {
					t.Errorf("%s: label %q is not snake_case", name, l.GetName())
				}
			}
		}
	}
}
