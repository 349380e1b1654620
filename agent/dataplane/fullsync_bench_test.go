package dataplane

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// BenchmarkKernelFullResync times a full sync of an unchanged table through each backend: the
// render of every Service, the read of the table over netlink and the comparison; nothing is
// written ("ops/tx" must be 0). 5,000 Services of 10 endpoints, or FLEETSLICE_BENCH_SERVICES;
// FLEETSLICE_BENCH_AFFINITY_EVERY gives some ClientIP affinity, FLEETSLICE_BENCH_BACKEND picks one
// backend. "restart" is the first full sync of a new Syncer on the table (an agent restart),
// which also reads the affinity maps it has no record of.
func BenchmarkKernelFullResync(b *testing.B) {
	sizes := []int{benchServices}
	if os.Getenv("FLEETSLICE_BENCH_SERVICES") != "" {
		sizes = scaleSizes(b)
	}
	backends := kernelBackends
	if only := os.Getenv("FLEETSLICE_BENCH_BACKEND"); only != "" {
		backends = []string{only}
	}
	for _, backend := range backends {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/%d", backend, n), func(b *testing.B) { fullResync(b, backend, n) })
		}
	}
}

func fullResync(b *testing.B, backend string, n int) {
	requireKernel(b)
	ns := enterNetns(b, newNetns(b, uniquePrefix(b), "resync"))
	s, _ := openBackend(b, ns, backend, knftables.IPv4Family, Options{})
	services := scaleServices(n, benchEndpoints)
	withAffinity(b, services)
	start := time.Now()
	kernelSync(b, s, ns, services, true)
	b.Logf("%s, %d Services: cold sync %v", backend, n, time.Since(start))
	for _, restart := range []bool{false, true} {
		name := "periodic"
		if restart {
			name = "restart"
		}
		b.Run(name, func(b *testing.B) {
			var st Stats
			cpu := startCPU()
			for b.Loop() {
				if restart {
					b.StopTimer()
					s, _ = openBackend(b, ns, backend, knftables.IPv4Family, Options{})
					b.StartTimer()
				}
				st = kernelSync(b, s, ns, services, true)
				if st.Operations != 0 || st.Rebuilt != "" {
					b.Fatalf("a full sync of an unchanged table wrote: %+v", st)
				}
			}
			cpu.report(b)
			b.ReportMetric(float64(st.Operations), "ops/tx")
		})
	}
	var err error
	ns.do(func() { _, err = s.SyncChanges(context.Background(), nil, nil) })
	if err != nil {
		b.Fatal(err)
	}
}
