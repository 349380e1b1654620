package agentbench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

const metricsText = `# HELP kubeproxy_sync_proxy_rules_duration_seconds SyncProxyRules latency in seconds
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.001"} 0
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.5
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 2
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 0.25
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 1
kubeproxy_sync_proxy_rules_duration_seconds_total_count 99
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1.7645e+09
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 1.7644e+09
fleetslice_agent_sync_proxy_rules_duration_seconds_sum 0.125
fleetslice_agent_sync_proxy_rules_duration_seconds_count 1
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 12 1700000000000

go_gc_duration_seconds{quantile="0.5"} NaN
`

func TestParseMetrics(t *testing.T) {
	s, err := parseMetrics(metricsText)
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		`kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"}`:         0.5,
		"fleetslice_agent_sync_proxy_rules_duration_seconds_count":                  1,
		`kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"}`:             3,
		`rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"}`: 12,
	} {
		if got, ok := s[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if v := s[`go_gc_duration_seconds{quantile="0.5"}`]; !math.IsNaN(v) {
		t.Errorf("NaN sample read as %v", v)
	}
	// Summed over the label sets, and a longer name sharing the prefix is another metric.
	h := s.histogram("kubeproxy_sync_proxy_rules_duration_seconds")
	if h.sum != 0.75 || h.count != 3 {
		t.Errorf("histogram = %+v, want sum 0.75 of 3", h)
	}
	if h := s.histogram("fleetslice_agent_sync_proxy_rules_duration_seconds"); h.sum != 0.125 || h.count != 1 {
		t.Errorf("unlabelled histogram = %+v", h)
	}
	if got := s.latest("kubeproxy_sync_proxy_rules_last_timestamp_seconds"); got != 1.7645e9 {
		t.Errorf("latest = %v, want the larger of the label sets", got)
	}
	if h := s.histogram("absent"); h.sum != 0 || h.count != 0 {
		t.Errorf("absent histogram = %+v, want empty", h)
	}
}

func TestParseMetricsRefusesWhatItCannotRead(t *testing.T) {
	for _, text := range []string{
		"lonely_name",
		"name{a=\"b\"}",
		"name notanumber",
		"name 1 2 3",
	} {
		if _, err := parseMetrics(text); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
}

func TestHistogramSince(t *testing.T) {
	before := histogram{sum: 1, count: 2}
	mean, n := histogram{sum: 1.5, count: 4}.since(before)
	if n != 2 || mean != 0.25 {
		t.Errorf("since = %v over %d, want 0.25 over 2", mean, n)
	}
	if mean, n := before.since(before); n != 0 || !math.IsNaN(mean) {
		t.Errorf("no observation: %v over %d, want NaN over 0", mean, n)
	}
	// A program restarted in between (counts went down) is not a negative observation.
	if mean, n := (histogram{}).since(before); n != 0 || !math.IsNaN(mean) {
		t.Errorf("reset: %v over %d, want NaN over 0", mean, n)
	}
}

func TestLastSync(t *testing.T) {
	r := &running{program: program{prefix: "kubeproxy_"}}
	s, err := parseMetrics(metricsText)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.lastSync(s); !got.Equal(time.Unix(1764500000, 0)) {
		t.Errorf("lastSync = %v", got)
	}
	if got := r.lastSync(scrape{}); !got.IsZero() {
		t.Errorf("lastSync before any sync = %v, want zero", got)
	}
}

func TestHoldsAll(t *testing.T) {
	listing := strings.Join([]string{
		"table ip kube-proxy {",
		"	chain endpoint-ABC-ns/svc/tcp/http__10.16.0.10/8080 {",
		"		ip saddr 10.16.0.10 jump mark-for-masquerade",
		"	}",
		"	map service-ips { elements = { 10.96.0.1 . tcp . 80 : goto service-X } }",
		"}",
	}, "\n")
	for _, c := range []struct {
		addrs []string
		want  bool
	}{
		{[]string{"10.16.0.10", "10.96.0.1"}, true},
		{[]string{"10.16.0.1"}, false},
		{[]string{"10.96.0.1", "10.96.0.2"}, false},
		{nil, true},
	} {
		if got := holdsAll(listing, c.addrs); got != c.want {
			t.Errorf("holdsAll(%v) = %v, want %v", c.addrs, got, c.want)
		}
	}
}

func TestParseVersusSizes(t *testing.T) {
	got, err := parseVersusSizes([]string{"1000x10", " 5000x50", "50000x10/agent"})
	if err != nil {
		t.Fatal(err)
	}
	want := []versusSize{{services: 1000, endpoints: 10}, {services: 5000, endpoints: 50}, {services: 50000, endpoints: 10, agentOnly: true}}
	if !slices.Equal(got, want) || got[2].String() != "50000x10/agent" {
		t.Errorf("sizes = %v, want %v", got, want)
	}
	for _, bad := range []string{"1000", "x10", "0x10", "10x0", "10x1001", "1000x", "ax10", "2000000x10", "100x10/kube-proxy", "/agent"} {
		if _, err := parseVersusSizes([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
