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

func (f *fakeStore) AddressNames(addr netip.Addr) []string {
	var out []string
	for k, svc := range f.services {
		ns, name, _ := strings.Cut(k, "/")
		for _, a := range svc.AddressNames(ns, name) {
			if a.Addr == addr {
				out = append(out, a.Name)
			}
		}
	}
	return out
}

func (f *fakeStore) HasAddressIn(prefix netip.Prefix) bool {
	for k, svc := range f.services {
		ns, name, _ := strings.Cut(k, "/")
		for _, a := range svc.AddressNames(ns, name) {
			if prefix.Contains(a.Addr) {
				return true
			}
		}
	}
	return false
}

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

// localPTR stands for CoreDNS's kubernetes plugin after clusterset: it has a PTR record for
// 10.0.0.10 (a local Service's ClusterIP), a broken one for 10.0.0.13, a broken and a good one
// for 10.0.0.14 and nothing else, and counts the queries it gets.
type localPTR struct{ asked int }

func (l *localPTR) ServeDNS(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	l.asked++
	m := new(dns.Msg).SetReply(r)
	switch r.Question[0].Name {
	case "10.0.0.10.in-addr.arpa.":
		m.Answer = []dns.RR{test.PTR("10.0.0.10.in-addr.arpa. 5 IN PTR web-derived.demo.svc.cluster.local.")}
	case "13.0.0.10.in-addr.arpa.", "14.0.0.10.in-addr.arpa.":
		// What the kubernetes plugin builds for an imported headless slice's address.
		m.Answer = []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 5}, Ptr: "db-0..demo.svc.cluster.local."}}
		if r.Question[0].Name == "14.0.0.10.in-addr.arpa." {
			// ... beside the record of the member's own slice for the same Pod.
			m.Answer = append(m.Answer, test.PTR("14.0.0.10.in-addr.arpa. 5 IN PTR db-0.db.demo.svc.cluster.local."))
		}
	default:
		m.Rcode = dns.RcodeNameError
	}
	return m.Rcode, w.WriteMsg(m)
}

func (l *localPTR) Name() string { return "kubernetes" }

// TestServeDNSReverseZones: PTR records of imported addresses come from this plugin only where
// the next plugins have none, and reverse names it does not know go on.
func TestServeDNSReverseZones(t *testing.T) {
	store := &fakeStore{synced: true, services: map[string]*records.Service{
		"demo/web": {IPs: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11"), netip.MustParseAddr("10.0.0.13"), netip.MustParseAddr("10.0.0.14")}},
	}}
	zones := []string{"in-addr.arpa.", "clusterset.local.", "ip6.arpa."}
	for _, tc := range []struct {
		name      string
		fall      fall.F
		qname     string
		rcode     int
		answer    string
		nextAsked bool
	}{
		{"the local PTR wins", fall.F{Zones: []string{"in-addr.arpa.", "ip6.arpa."}}, "10.0.0.10.in-addr.arpa.", dns.RcodeSuccess, "web-derived.demo.svc.cluster.local.", true},
		{"without a local PTR, the clusterset one", fall.F{Zones: []string{"in-addr.arpa.", "ip6.arpa."}}, "11.0.0.10.in-addr.arpa.", dns.RcodeSuccess, "web.demo.svc.clusterset.local.", true},
		{"a local PTR that cannot be sent does not win", fall.F{Zones: []string{"in-addr.arpa.", "ip6.arpa."}}, "13.0.0.10.in-addr.arpa.", dns.RcodeSuccess, "web.demo.svc.clusterset.local.", true},
		{"the local PTR that can be sent wins", fall.F{Zones: []string{"in-addr.arpa.", "ip6.arpa."}}, "14.0.0.10.in-addr.arpa.", dns.RcodeSuccess, "db-0.db.demo.svc.cluster.local.", true},
		{"unknown address goes on", fall.F{Zones: []string{"in-addr.arpa.", "ip6.arpa."}}, "12.0.0.10.in-addr.arpa.", dns.RcodeNameError, "", true},
		{"without fallthrough the zone is this plugin's alone", fall.F{}, "10.0.0.10.in-addr.arpa.", dns.RcodeSuccess, "web.demo.svc.clusterset.local.", false},
		{"without fallthrough unknown is NXDOMAIN", fall.F{}, "12.0.0.10.in-addr.arpa.", dns.RcodeNameError, "", false},
		{"fallthrough for the other family only", fall.F{Zones: []string{"ip6.arpa."}}, "10.0.0.10.in-addr.arpa.", dns.RcodeSuccess, "web.demo.svc.clusterset.local.", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			local := &localPTR{}
			c := &Clusterset{Next: local, Zones: zones, TTL: 5, Store: store, Fall: tc.fall}
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			if _, err := c.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(tc.qname, dns.TypePTR)); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == nil || rec.Msg.Rcode != tc.rcode {
				t.Fatalf("reply %v, want rcode %s", rec.Msg, dns.RcodeToString[tc.rcode])
			}
			got := ""
			if len(rec.Msg.Answer) == 1 {
				got = rec.Msg.Answer[0].(*dns.PTR).Ptr
			}
			if got != tc.answer || (local.asked > 0) != tc.nextAsked {
				t.Fatalf("answer %q (next asked %d times), want %q (asked: %v)", got, local.asked, tc.answer, tc.nextAsked)
			}
		})
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
