package apiclient

import (
	"context"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/rest"
)

func TestThrottleRefusesLimitsThatCannotWork(t *testing.T) {
	for _, bad := range []struct {
		qps   float32
		burst int
	}{{0, 10}, {10, 0}, {5, -1}} {
		if err := Throttle(&rest.Config{}, "member", bad.qps, bad.burst); err == nil {
			t.Errorf("qps %v burst %d accepted", bad.qps, bad.burst)
		}
	}
}

func TestThrottleWithoutLimit(t *testing.T) {
	cfg := &rest.Config{}
	if err := Throttle(cfg, "member", -1, 0); err != nil {
		t.Fatal(err)
	}
	if cfg.RateLimiter != nil || cfg.QPS >= 0 {
		t.Fatalf("no limit wanted, got QPS %v limiter %v", cfg.QPS, cfg.RateLimiter)
	}
}

func TestThrottleMeasuresEveryWait(t *testing.T) {
	cfg := &rest.Config{}
	if err := Throttle(cfg, "test-client", 1000, 2); err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 1000 || cfg.Burst != 2 {
		t.Fatalf("QPS %v burst %d", cfg.QPS, cfg.Burst)
	}
	before := observed(t, "test-client")
	for range 5 {
		if err := cfg.RateLimiter.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := observed(t, "test-client") - before; got != 5 {
		t.Fatalf("%d waits recorded, want 5", got)
	}
}

func observed(t *testing.T, client string) uint64 {
	t.Helper()
	m := &dto.Metric{}
	h, err := rateLimiterWait.GetMetricWithLabelValues(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.(interface{ Write(*dto.Metric) error }).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
