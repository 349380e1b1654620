package clusterset

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"

	"github.com/fleetslice/fleetslice/dns/records"
)

type fakeStore struct {
	synced   bool
	services map[string]*records.Service
}

func (f *fakeStore) Service(ns, name string) (*records.Service, bool) {
	s, ok := f.services[ns+"/"+name]
	return s, ok
}
func (f *fakeStore) Namespace(ns string) bool { return false }
func (f *fakeStore) Serial() uint32           { return 1 }
func (f *fakeStore) Synced() bool             { return f.synced }

// next answers every query it gets with a marker TXT record.
var next = plugin.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	m := new(dns.Msg).SetReply(r)
	m.Answer = []dns.RR{test.TXT(r.Question[0].Name + " 1 IN TXT next")}
	return dns.RcodeSuccess, w.WriteMsg(m)
})

func TestServeDNSRouting(t *testing.T) {
	store := &fakeStore{synced: true, services: map[string]*records.Service{
		"demo/web": {IPs: []netip.Addr{netip.MustParseAddr("10.0.0.10")}},
	}}
	plain := &Clusterset{Next: next, Zones: []string{"clusterset.local."}, TTL: 5, Store: store}
	fallsThrough := &Clusterset{Next: next, Zones: []string{"clusterset.local."}, TTL: 5, Store: store, Fall: fall.Root}
	for _, tc := range []struct {
		name   string
		c      *Clusterset
		qname  string
		rcode  int
		answer string
	}{
		{"own name", plain, "web.demo.svc.clusterset.local.", dns.RcodeSuccess, "10.0.0.10"},
		{"other zone goes on", plain, "web.demo.svc.cluster.local.", dns.RcodeSuccess, "next"},
		{"nxdomain without fallthrough", plain, "api.demo.svc.clusterset.local.", dns.RcodeNameError, ""},
		{"nxdomain with fallthrough goes on", fallsThrough, "api.demo.svc.clusterset.local.", dns.RcodeSuccess, "next"},
		{"existing name with fallthrough", fallsThrough, "web.demo.svc.clusterset.local.", dns.RcodeSuccess, "10.0.0.10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			if _, err := tc.c.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(tc.qname, dns.TypeA)); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == nil || rec.Msg.Rcode != tc.rcode {
				t.Fatalf("reply %v, want rcode %s", rec.Msg, dns.RcodeToString[tc.rcode])
			}
			got := ""
			if len(rec.Msg.Answer) > 0 {
				got = rec.Msg.Answer[0].String()
			}
			if !strings.Contains(got, tc.answer) {
				t.Fatalf("answer %q, want %q", got, tc.answer)
			}
		})
	}
}

func TestServeDNSBeforeSyncIsServfail(t *testing.T) {
	c := &Clusterset{Next: next, Zones: []string{"clusterset.local."}, TTL: 5, Store: &fakeStore{}}
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rcode, _ := c.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion("web.demo.svc.clusterset.local.", dns.TypeA))
	if rcode != dns.RcodeServerFailure || rec.Msg != nil || c.Ready() {
		t.Fatalf("rcode %s, written %v, ready %v: want SERVFAIL for the server to write, not ready", dns.RcodeToString[rcode], rec.Msg, c.Ready())
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, corefile string
		err            string
		zones          []string
		ttl            uint32
		fall           bool
	}{
		{"defaults from the server block", "clusterset", "", []string{"clusterset.local."}, DefaultTTL, false},
		{"zone argument, ttl, fallthrough", "clusterset example.org {\n ttl 30\n fallthrough\n kubeconfig /k ctx\n}", "", []string{"example.org."}, 30, true},
		{"ttl zero", "clusterset {\n ttl 0\n}", "", []string{"clusterset.local."}, 0, false},
		{"ttl too long", "clusterset {\n ttl 3601\n}", "ttl must be", nil, 0, false},
		{"ttl not a number", "clusterset {\n ttl soon\n}", "ttl must be", nil, 0, false},
		{"kubeconfig without path", "clusterset {\n kubeconfig\n}", "Wrong argument count", nil, 0, false},
		{"unknown property", "clusterset {\n resync 5m\n}", "unknown property", nil, 0, false},
		{"bad startup timeout", "clusterset {\n startup_timeout forever\n}", "startup_timeout", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.corefile)
			c.ServerBlockKeys = []string{"clusterset.local.:53"}
			opts, err := parse(c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(opts.zones, ",") != strings.Join(tc.zones, ",") || opts.ttl != tc.ttl || opts.fall.Through("x.clusterset.local.") != tc.fall {
				t.Fatalf("parsed %+v", opts)
			}
		})
	}
}
