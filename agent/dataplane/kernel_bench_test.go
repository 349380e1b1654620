package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// kernelSyncer opens the real nftables inside a fresh, throwaway network
// namespace, so benchmarks never touch the host's ruleset.
func kernelSyncer(b *testing.B) (*Syncer, *nsThread) {
	requireKernel(b)
	ns := enterNetns(b, newNetns(b, uniquePrefix(b), "bench"))
	var s *Syncer
	var err error
	ns.do(func() {
		var nft knftables.Interface
		if nft, err = Open(knftables.IPv4Family); err == nil {
			s, err = New(nft, Options{})
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return s, ns
}

func kernelSync(b *testing.B, s *Syncer, ns *nsThread, services []Service, full bool) Stats {
	var st Stats
	var err error
	ns.do(func() { st, err = s.Sync(context.Background(), services, full) })
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// BenchmarkKernelColdSync5000x10 programs 5,000 Services x 10 endpoints
// into a namespace without our table.
func BenchmarkKernelColdSync5000x10(b *testing.B) {
	s, ns := kernelSyncer(b)
	services := scaleServices(benchServices, benchEndpoints)
	var st Stats
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		ns.do(func() { exec.Command("nft", "delete", "table", "ip", TableName).Run() })
		b.StartTimer()
		before := cpuTime()
		st = kernelSync(b, s, ns, services, true)
		cpu += cpuTime() - before
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	b.ReportMetric(float64(st.Operations), "ops/tx")
}

// BenchmarkKernelOneServiceChange5000x10 changes the endpoints of one
// Service among 5,000 per sync.
func BenchmarkKernelOneServiceChange5000x10(b *testing.B) {
	s, ns := kernelSyncer(b)
	services := scaleServices(benchServices, benchEndpoints)
	kernelSync(b, s, ns, services, true)
	var st Stats
	generation := 0
	cpu := startCPU()
	for b.Loop() {
		generation++
		victim := generation % benchServices
		services[victim].Ports[0].Endpoints = scaleEndpoints(victim, benchEndpoints, generation%7+1)
		st = kernelSync(b, s, ns, services, false)
	}
	cpu.report(b)
	b.ReportMetric(float64(st.Operations), "ops/tx")
}

// BenchmarkKernelAddOneService10000 adds one new Service to 10,000
// existing ones per sync, the case kube-proxy's nftables mode measured at
// about 141 ms (kubernetes/kubernetes PR 126013).
func BenchmarkKernelAddOneService10000(b *testing.B) {
	s, ns := kernelSyncer(b)
	services := scaleServices(10000, benchEndpoints)
	kernelSync(b, s, ns, services, true)
	var st Stats
	added := 0
	cpu := startCPU()
	for b.Loop() {
		added++
		services = append(services, Service{
			Namespace: "added", Name: fmt.Sprintf("svc-%d", added),
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 200, byte(added >> 8), byte(added)})},
			Ports:      []Port{{Name: "http", Protocol: TCP, Port: 80, Endpoints: scaleEndpoints(20000+added, benchEndpoints, 0)}},
		})
		st = kernelSync(b, s, ns, services, false)
		if st.Changed != 1 {
			b.Fatalf("changed = %d", st.Changed)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(st.Operations), "ops/tx")
}
