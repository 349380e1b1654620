package clusterset

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// BenchmarkServeDNS measures the plugin's own cost per query (no network, no CoreDNS server
// around it) with 1,000 and 10,000 imports, cycling through existing and missing names: A
// queries for Service names, and PTR queries for their clusterset IPs (the address index; no
// plugin after this one to ask first). It reports p50 and p99 per query besides ns/op.
func BenchmarkServeDNS(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, qtype := range []uint16{dns.TypeA, dns.TypePTR} {
			b.Run(fmt.Sprintf("services=%d/%s", n, dns.TypeToString[qtype]), func(b *testing.B) {
				benchmarkQueries(b, n, qtype)
			})
		}
	}
}

func benchmarkQueries(b *testing.B, n int, qtype uint16) {
	c := &Clusterset{Zones: []string{"clusterset.local.", "in-addr.arpa."}, TTL: DefaultTTL, Store: fillStore(n)}
	queries := make([]*dns.Msg, 1024)
	for i := range queries {
		svc := (i * 7919) % n
		name := fmt.Sprintf("svc-%d.ns-%d.svc.clusterset.local.", svc, svc%10)
		if i%8 == 0 {
			name = fmt.Sprintf("missing-%d.ns-1.svc.clusterset.local.", i)
		}
		if qtype == dns.TypePTR {
			// fillStore's addresses, and for every eighth query one it does not hold.
			name = fmt.Sprintf("%d.%d.%d.10.in-addr.arpa.", svc&255, svc>>8&255, svc>>16&255)
			if i%8 == 0 {
				name = fmt.Sprintf("%d.%d.99.10.in-addr.arpa.", i&255, i>>8&255)
			}
		}
		queries[i] = new(dns.Msg).SetQuestion(name, qtype)
	}
	w := &test.ResponseWriter{}
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		rec := dnstest.NewRecorder(w)
		start := time.Now()
		if _, err := c.ServeDNS(context.Background(), rec, queries[i%len(queries)]); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durations)
	if len(durations) > 0 {
		b.ReportMetric(float64(durations[len(durations)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(durations[len(durations)*99/100].Nanoseconds()), "p99-ns")
	}
}
