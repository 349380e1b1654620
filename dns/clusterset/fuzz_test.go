package clusterset

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// FuzzServeDNS drives the plugin's query path with whatever unpacks from raw bytes, over a
// store with 100 imports: it must never panic, and it either writes a reply to the query or
// returns an error rcode for the server to write.
func FuzzServeDNS(f *testing.F) {
	for _, name := range []string{"svc-1.ns-1.svc.clusterset.local.", "x.svc.clusterset.local.", "example.org."} {
		wire, err := new(dns.Msg).SetQuestion(name, dns.TypeA).Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire)
	}
	c := &Clusterset{Zones: []string{"clusterset.local."}, TTL: DefaultTTL, Store: fillStore(100)}
	f.Fuzz(func(t *testing.T, wire []byte) {
		req := new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			return
		}
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		rcode, _ := c.ServeDNS(context.Background(), rec, req)
		if rec.Msg == nil {
			if rcode == dns.RcodeSuccess {
				t.Fatal("success returned without a reply written")
			}
			return
		}
		if rec.Msg.Id != req.Id || !rec.Msg.Response {
			t.Fatalf("reply %v does not answer query %v", rec.Msg, req)
		}
	})
}
