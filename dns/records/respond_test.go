package records

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// mapLookup is a Lookup over a map keyed "namespace/name". It finds addresses by scanning every
// Service, independently of the Store's index.
type mapLookup map[string]*Service

func (l mapLookup) Service(namespace, name string) (*Service, bool) {
	s, ok := l[namespace+"/"+name]
	return s, ok
}

func (l mapLookup) Namespace(namespace string) bool {
	for k := range l {
		if strings.HasPrefix(k, namespace+"/") {
			return true
		}
	}
	return false
}

func (l mapLookup) AddressNames(addr netip.Addr) []string {
	var out []string
	for k, svc := range l {
		ns, name, _ := strings.Cut(k, "/")
		for _, a := range svc.AddressNames(ns, name) {
			if a.Addr == addr {
				out = append(out, a.Name)
			}
		}
	}
	return out
}

func (l mapLookup) HasAddressIn(prefix netip.Prefix) bool {
	for k, svc := range l {
		ns, name, _ := strings.Cut(k, "/")
		for _, a := range svc.AddressNames(ns, name) {
			if prefix.Contains(a.Addr) {
				return true
			}
		}
	}
	return false
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

var (
	testZone = Zone{Name: "clusterset.local.", TTL: 5, Serial: 42}
	v4Zone   = Zone{Name: "in-addr.arpa.", TTL: 5, Serial: 42}
	v6Zone   = Zone{Name: "ip6.arpa.", TTL: 5, Serial: 42}
)

// zoneFor picks the test zone a name falls in, as the plugin matches its zones; names in none
// get the clusterset zone, which refuses them.
func zoneFor(name string) Zone {
	name = strings.ToLower(dns.Fqdn(name))
	for _, z := range []Zone{v4Zone, v6Zone} {
		if dns.IsSubDomain(z.Name, name) {
			return z
		}
	}
	return testZone
}

func testLookup() mapLookup {
	pg := Port{Name: "pg", Protocol: "tcp", Port: 5432}
	unnamed := Port{Protocol: "tcp", Port: 9}
	return mapLookup{
		"demo/web": {
			IPs:   addrs("10.0.0.10", "fd00:10::10"),
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "", Protocol: "tcp", Port: 8080}, {Name: "dns", Protocol: "udp", Port: 53}},
		},
		"demo/v4only": {IPs: addrs("10.0.0.11"), Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}},
		"demo/db": {
			Headless: true,
			Ports:    []Port{pg},
			Endpoints: []Endpoint{
				// Hostnames as Build gives them: the second endpoint had none.
				{Cluster: "east", Hostname: "db-0", Addrs: addrs("10.1.0.5"), Ports: []Port{pg, unnamed}},
				{Cluster: "east", Hostname: "10-1-0-6", Addrs: addrs("10.1.0.6"), Ports: []Port{pg, unnamed}},
				{Cluster: "west", Hostname: "db-0", Addrs: addrs("10.2.0.5", "fd00:2::5"), Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 15432}}},
				{Cluster: "zone.b", Hostname: "db-1", Addrs: addrs("10.3.0.5"), Ports: []Port{pg}},
			},
		},
		// A headless import whose endpoints are all gone, or not ready.
		"demo/empty": {Headless: true, Ports: []Port{pg}},
		// A Pod behind two headless Services: its address has two names.
		"shared/cache": {
			Headless:  true,
			Endpoints: []Endpoint{{Cluster: "east", Hostname: "cache-0", Addrs: addrs("10.1.0.5"), Ports: []Port{{Name: "redis", Protocol: "tcp", Port: 6379}}}},
		},
	}
}

// summary renders a section as sorted "TYPE value" strings, with the owner when it differs from
// the question.
func summary(rrs []dns.RR, qname string) []string {
	var out []string
	for _, rr := range rrs {
		var s string
		switch r := rr.(type) {
		case *dns.A:
			s = "A " + r.A.String()
		case *dns.AAAA:
			s = "AAAA " + r.AAAA.String()
		case *dns.SRV:
			s = fmt.Sprintf("SRV %d %s", r.Port, r.Target)
		case *dns.SOA:
			s = fmt.Sprintf("SOA %s %d", r.Hdr.Name, r.Minttl)
		case *dns.PTR:
			s = "PTR " + r.Ptr
		case *dns.TXT:
			s = "TXT " + strings.Join(r.Txt, " ")
		default:
			s = rr.String()
		}
		if rr.Header().Name != qname && rr.Header().Rrtype != dns.TypeSOA {
			s = rr.Header().Name + " " + s
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

type respondCase struct {
	name, qname string
	qtype       uint16
	rcode       int
	answer      []string
	ns          []string
	extra       []string
}

// runRespondCases asks each case of its zone (zoneFor) and compares every section.
func runRespondCases(t *testing.T, cases []respondCase) {
	lookup := testLookup()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := new(dns.Msg).SetQuestion(tc.qname, tc.qtype)
			z := zoneFor(tc.qname)
			m := Respond(z, lookup, req)
			if m.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if m.Id != req.Id || !m.Response || m.Question[0] != req.Question[0] {
				t.Fatalf("reply does not match the query: %v", m)
			}
			check := func(section string, got []dns.RR, want []string) {
				t.Helper()
				if g := summary(got, tc.qname); !slices.Equal(g, want) {
					t.Errorf("%s: got %q, want %q", section, g, want)
				}
			}
			check("answer", m.Answer, tc.answer)
			check("authority", m.Ns, tc.ns)
			check("additional", m.Extra, tc.extra)
			for _, rr := range append(append(m.Answer, m.Ns...), m.Extra...) {
				want := z.TTL
				if rr.Header().Rrtype == dns.TypeTXT {
					want = schemaVersionTTL
				}
				if rr.Header().Ttl != want {
					t.Errorf("TTL %d on %v, want %d", rr.Header().Ttl, rr, want)
				}
			}
			if _, err := m.Pack(); err != nil {
				t.Errorf("reply does not pack: %v", err)
			}
			checkConsistent(t, lookup, req, m)
		})
	}
}

var soa = []string{"SOA clusterset.local. 5"}

func TestRespondRules(t *testing.T) {
	webAddrs := []string{"web.demo.svc.clusterset.local. A 10.0.0.10", "web.demo.svc.clusterset.local. AAAA fd00:10::10"}
	runRespondCases(t, []respondCase{
		{"clusterset ip A", "web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.0.0.10"}, nil, nil},
		{"clusterset ip AAAA", "web.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:10::10"}, nil, nil},
		{"other family is NODATA", "v4only.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, nil, soa, nil},
		{"case-insensitive, owner as asked", "WeB.DEMO.svc.ClusterSet.Local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.0.0.10"}, nil, nil},
		{"not imported is NXDOMAIN", "nope.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"other namespace is NXDOMAIN", "web.other.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"not under svc is NXDOMAIN", "web.demo.pod.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"srv of named port", "_http._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 80 web.demo.svc.clusterset.local."}, nil, webAddrs},
		{"srv of udp port", "_dns._udp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 53 web.demo.svc.clusterset.local."}, nil, webAddrs},
		{"srv with wrong protocol is NXDOMAIN", "_http._udp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, soa, nil},
		{"srv of unknown port is NXDOMAIN", "_grpc._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, soa, nil},
		{"A on srv name is NODATA", "_http._tcp.web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"headless A spans clusters", "db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{"A 10.1.0.5", "A 10.1.0.6", "A 10.2.0.5", "A 10.3.0.5"}, nil, nil},
		{"headless AAAA", "db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:2::5"}, nil, nil},
		{"headless hostname in one cluster", "db-0.west.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.2.0.5"}, nil, nil},
		{"headless hostname in the other", "DB-0.East.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.1.0.5"}, nil, nil},
		{"headless endpoint without hostname by its id", "10-1-0-6.east.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.1.0.6"}, nil, nil},
		{"headless hostname with dotted cluster id", "db-1.zone.b.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.3.0.5"}, nil, nil},
		{"headless hostname other family NODATA", "db-0.east.db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, nil, soa, nil},
		{"headless unknown hostname is NXDOMAIN", "db-9.east.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"hostname under clusterset ip import is NXDOMAIN", "db-0.east.web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"headless srv names every ready endpoint", "_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 15432 db-0.west.db.demo.svc.clusterset.local.", "SRV 5432 10-1-0-6.east.db.demo.svc.clusterset.local.", "SRV 5432 db-0.east.db.demo.svc.clusterset.local.", "SRV 5432 db-1.zone.b.db.demo.svc.clusterset.local."}, nil,
			[]string{"10-1-0-6.east.db.demo.svc.clusterset.local. A 10.1.0.6", "db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5", "db-0.west.db.demo.svc.clusterset.local. A 10.2.0.5", "db-0.west.db.demo.svc.clusterset.local. AAAA fd00:2::5", "db-1.zone.b.db.demo.svc.clusterset.local. A 10.3.0.5"}},
		{"headless without ready endpoints is NXDOMAIN", "empty.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"srv below headless without ready endpoints is NXDOMAIN", "_pg._tcp.empty.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, soa, nil},
		{"namespace is an empty non-terminal", "demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"unknown namespace is NXDOMAIN", "other.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"svc is an empty non-terminal", "svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"apex SOA", "clusterset.local.", dns.TypeSOA, dns.RcodeSuccess, soa, nil, nil},
		{"apex A is NODATA", "clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"name in the wrong zone is refused", "web.demo.svc.cluster.local.", dns.TypeA, dns.RcodeRefused, nil, nil, nil},
	})
}

// TestRespondSpecAdditions covers what the specification asks beyond the first version: the
// schema version, empty non-terminals and SRV records at the Service name.
func TestRespondSpecAdditions(t *testing.T) {
	runRespondCases(t, []respondCase{
		{"dns-version TXT", "dns-version.clusterset.local.", dns.TypeTXT, dns.RcodeSuccess, []string{"TXT 1.0.0"}, nil, nil},
		{"dns-version other type is NODATA", "dns-version.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"below dns-version is NXDOMAIN", "x.dns-version.clusterset.local.", dns.TypeTXT, dns.RcodeNameError, nil, soa, nil},
		{"TXT of a Service is NODATA", "web.demo.svc.clusterset.local.", dns.TypeTXT, dns.RcodeSuccess, nil, soa, nil},
		{"cluster of a headless import is an empty non-terminal", "east.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"cluster of a headless import has no SRV either", "west.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess, nil, soa, nil},
		{"dotted cluster id, whole", "zone.b.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"dotted cluster id, last part", "b.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"unknown cluster is NXDOMAIN", "north.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"cluster under clusterset ip import is NXDOMAIN", "east.web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"protocol of srv names is an empty non-terminal", "_tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess, nil, soa, nil},
		{"protocol of headless srv names", "_tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess, nil, soa, nil},
		{"protocol without named port is NXDOMAIN", "_udp.v4only.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, soa, nil},
		{"srv at clusterset ip service name", "web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 53 web.demo.svc.clusterset.local.", "SRV 80 web.demo.svc.clusterset.local.", "SRV 8080 web.demo.svc.clusterset.local."}, nil,
			[]string{"A 10.0.0.10", "AAAA fd00:10::10"}},
		{"srv at headless service name", "db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 15432 db-0.west.db.demo.svc.clusterset.local.", "SRV 5432 10-1-0-6.east.db.demo.svc.clusterset.local.", "SRV 5432 db-0.east.db.demo.svc.clusterset.local.",
				"SRV 5432 db-1.zone.b.db.demo.svc.clusterset.local.", "SRV 9 10-1-0-6.east.db.demo.svc.clusterset.local.", "SRV 9 db-0.east.db.demo.svc.clusterset.local."}, nil,
			[]string{"10-1-0-6.east.db.demo.svc.clusterset.local. A 10.1.0.6", "db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5", "db-0.west.db.demo.svc.clusterset.local. A 10.2.0.5", "db-0.west.db.demo.svc.clusterset.local. AAAA fd00:2::5", "db-1.zone.b.db.demo.svc.clusterset.local. A 10.3.0.5"}},
		{"srv at headless service name without ready endpoints is NXDOMAIN", "empty.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, soa, nil},
		{"srv at endpoint name is NODATA", "db-0.west.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess, nil, soa, nil},
	})
}

func TestRespondRefusesWhatItCannotAnswer(t *testing.T) {
	two := new(dns.Msg).SetQuestion("web.demo.svc.clusterset.local.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	none := new(dns.Msg)
	chaos := new(dns.Msg).SetQuestion("web.demo.svc.clusterset.local.", dns.TypeA)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	update := new(dns.Msg).SetUpdate("clusterset.local.")
	for _, tc := range []struct {
		name  string
		req   *dns.Msg
		rcode int
	}{
		{"two questions", two, dns.RcodeFormatError},
		{"no question", none, dns.RcodeFormatError},
		{"chaos class", chaos, dns.RcodeRefused},
		{"update", update, dns.RcodeNotImplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Respond(testZone, testLookup(), tc.req)
			if m.Rcode != tc.rcode || len(m.Answer) != 0 {
				t.Fatalf("got rcode %s with %d answers, want %s and none", dns.RcodeToString[m.Rcode], len(m.Answer), dns.RcodeToString[tc.rcode])
			}
		})
	}
}
