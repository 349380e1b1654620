package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// scaleSizes are the table sizes the scale benchmarks program: FLEETSLICE_BENCH_SERVICES
// (comma-separated) or 1,000, 10,000 and 50,000 Services of 10 endpoints.
func scaleSizes(b *testing.B) []int {
	spec := os.Getenv("FLEETSLICE_BENCH_SERVICES")
	if spec == "" {
		return []int{1000, 10000, 50000}
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("FLEETSLICE_BENCH_SERVICES: %q", f)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkKernelScale programs n Services into a scratch namespace through each backend
// (FLEETSLICE_BENCH_BACKEND=nft or netlink for one; the cold sync is logged; with
// FLEETSLICE_BENCH_AFFINITY_EVERY some have ClientIP affinity), then measures
// incremental syncs of one change:
// "endpoint" replaces one endpoint of one Service, "service" adds one new Service, each told
// only the change or given every Service. The change
// is the same at every size; what the sync costs should not depend on n.
// FLEETSLICE_BENCH_PAUSE (a duration) waits that long, untimed, after each change: the agent's
// changes come seconds apart, when the kernel's memory and the process's are out of the
// caches, and changes back to back hide what that costs.
func BenchmarkKernelScale(b *testing.B) {
	backends := kernelBackends
	if only := os.Getenv("FLEETSLICE_BENCH_BACKEND"); only != "" {
		backends = []string{only}
	}
	for _, backend := range backends {
		for _, n := range scaleSizes(b) {
			b.Run(fmt.Sprintf("%s/%d", backend, n), func(b *testing.B) {
				requireKernel(b)
				ns := enterNetns(b, newNetns(b, uniquePrefix(b), "scale"))
				s, _ := openBackend(b, ns, backend, knftables.IPv4Family, Options{})
				services := scaleServices(n, benchEndpoints)
				withAffinity(b, services)
				start, cpu := time.Now(), startCPU()
				kernelSync(b, s, ns, services, true)
				b.Logf("%s, %d Services: cold sync %v, %.0f ms CPU", backend, n, time.Since(start), float64(cpuTime()-cpu.start)/1e6)
				generation := 0
				pause := benchPause(b)
				// "changes": told only the changed Service (SyncChanges, as the agent does);
				// "all": given every Service (Sync), which digests each of them.
				for _, input := range []string{"changes", "all"} {
					for _, change := range []string{"endpoint", "service"} {
						b.Run(change+"/"+input, func(b *testing.B) {
							var st Stats
							var took []time.Duration
							cpu := startCPU()
							for b.Loop() {
								generation++
								var touched Service
								if change == "endpoint" {
									victim := generation * 7919 % n
									eps := services[victim].Ports[0].Endpoints
									eps[generation%len(eps)].Addr = netip.AddrPortFrom(
										netip.AddrFrom4([4]byte{10, 127, byte(generation >> 8), byte(generation)}), 8080)
									touched = services[victim]
								} else {
									services = append(services, Service{
										Namespace: "added", Name: fmt.Sprintf("svc-%d", generation),
										ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 200, byte(generation >> 8), byte(generation)})},
										Ports:      []Port{{Name: "http", Protocol: TCP, Port: 80, Endpoints: scaleEndpoints(n+generation, benchEndpoints, 0)}},
									})
									touched = services[len(services)-1]
								}
								if input == "changes" {
									st = kernelSyncChanges(b, s, ns, []Service{touched})
								} else {
									st = kernelSync(b, s, ns, services, false)
								}
								if st.Changed != 1 {
									b.Fatalf("changed = %d", st.Changed)
								}
								took = append(took, st.Duration)
								if pause > 0 {
									b.StopTimer()
									time.Sleep(pause)
									b.StartTimer()
								}
							}
							cpu.report(b)
							b.ReportMetric(float64(st.Operations), "ops/tx")
							// The mean hides what a typical change costs when a few changes cost much
							// more (one that touches an affinity Service makes the kernel check the table).
							slices.Sort(took)
							b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
						})
					}
				}
			})
		}
	}
}

func kernelSyncChanges(b *testing.B, s *Syncer, ns *nsThread, changed []Service) Stats {
	var st Stats
	var err error
	ns.do(func() { st, err = s.SyncChanges(context.Background(), changed, nil) })
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// benchPause is FLEETSLICE_BENCH_PAUSE, zero when unset.
func benchPause(b *testing.B) time.Duration {
	spec := os.Getenv("FLEETSLICE_BENCH_PAUSE")
	if spec == "" {
		return 0
	}
	d, err := time.ParseDuration(spec)
	if err != nil || d < 0 {
		b.Fatalf("FLEETSLICE_BENCH_PAUSE: %q is not a duration", spec)
	}
	return d
}

// withAffinity gives every FLEETSLICE_BENCH_AFFINITY_EVERY-th Service ClientIP affinity, as the
// agent bench's Service mix has (every 50th): each of its endpoints then has a set of its own, so
// the table holds thousands of sets, as a real node's does, instead of a handful.
func withAffinity(b *testing.B, services []Service) {
	spec := os.Getenv("FLEETSLICE_BENCH_AFFINITY_EVERY")
	if spec == "" {
		return
	}
	every, err := strconv.Atoi(spec)
	if err != nil || every <= 0 {
		b.Fatalf("FLEETSLICE_BENCH_AFFINITY_EVERY: %q", spec)
	}
	for i := range services {
		if i%every == every/2 {
			services[i].AffinityTimeout = 3 * time.Hour
		}
	}
}
