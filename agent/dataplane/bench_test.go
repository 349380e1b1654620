package dataplane

import (
	"context"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

const (
	benchServices  = 5000
	benchEndpoints = 10
)

// benchBackends: "render" builds the transaction and discards it (the
// Syncer's own cost); "fake" also applies it to knftables.Fake, whose Run
// copies the whole table, so it grows with the table even for one change.
func benchBackends() map[string]func() knftables.Interface {
	return map[string]func() knftables.Interface{
		"render": func() knftables.Interface {
			return &discardNFT{Interface: knftables.NewFake(knftables.IPv4Family, TableName)}
		},
		"fake": func() knftables.Interface { return knftables.NewFake(knftables.IPv4Family, TableName) },
	}
}

// BenchmarkFullSync5000x10 renders the whole table from scratch. Only the
// "render" backend: the fake needs about 10 s per run at this size (its
// element lookups are linear), which would measure the fake, not us.
func BenchmarkFullSync5000x10(b *testing.B) {
	services := scaleServices(benchServices, benchEndpoints)
	for name, backend := range benchBackends() {
		if name != "render" {
			continue
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(backend(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			var st Stats
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				if st, err = s.Sync(context.Background(), services, true); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
			b.ReportMetric(float64(st.Operations), "ops/tx")
			if d, ok := s.nft.(*discardNFT); ok {
				b.ReportMetric(float64(d.lastBytes), "bytes/tx")
			}
		})
	}
}

func BenchmarkOneServiceChange5000x10(b *testing.B) {
	for name, backend := range benchBackends() {
		b.Run(name, func(b *testing.B) {
			services := scaleServices(benchServices, benchEndpoints)
			s, err := New(backend(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.Sync(ctx, services, true); err != nil {
				b.Fatal(err)
			}
			var st Stats
			generation := 0
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				generation++
				victim := generation % benchServices
				services[victim].Ports[0].Endpoints = scaleEndpoints(victim, benchEndpoints, generation%7+1)
				if st, err = s.Sync(ctx, services, false); err != nil {
					b.Fatal(err)
				}
				if st.Changed != 1 {
					b.Fatalf("changed = %d", st.Changed)
				}
			}
			cpu.report(b)
			b.ReportMetric(float64(st.Operations), "ops/tx")
			if d, ok := s.nft.(*discardNFT); ok {
				b.ReportMetric(float64(d.lastBytes), "bytes/tx")
			}
		})
	}
}

// cpuMeter reports CPU time per operation (this process plus the nft
// processes it waited for) next to wall time: on a shared, busy machine
// wall time mostly measures the neighbours, CPU time measures us.
type cpuMeter struct{ start time.Duration }

func cpuTime() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	total := time.Duration(0)
	for _, ru := range []syscall.Rusage{self, children} {
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

func startCPU() cpuMeter { return cpuMeter{cpuTime()} }

func (m cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(cpuTime()-m.start)/float64(b.N)/1e6, "cpu-ms/op")
}
