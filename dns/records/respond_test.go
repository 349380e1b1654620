package records

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// mapLookup is a Lookup over a map keyed "namespace/name".
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

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

var testZone = Zone{Name: "clusterset.local.", TTL: 5, Serial: 42}

func testLookup() mapLookup {
	return mapLookup{
		"demo/web": {
			IPs:   addrs("10.0.0.10", "fd00:10::10"),
			Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "", Protocol: "tcp", Port: 8080}, {Name: "dns", Protocol: "udp", Port: 53}},
		},
		"demo/v4only": {IPs: addrs("10.0.0.11"), Ports: []Port{{Name: "http", Protocol: "tcp", Port: 80}}},
		"demo/db": {
			Headless: true,
			Ports:    []Port{{Name: "pg", Protocol: "tcp", Port: 5432}},
			Endpoints: []Endpoint{
				{Cluster: "east", Hostname: "db-0", Addrs: addrs("10.1.0.5"), Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}},
				{Cluster: "east", Addrs: addrs("10.1.0.6"), Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}},
				{Cluster: "west", Hostname: "db-0", Addrs: addrs("10.2.0.5", "fd00:2::5"), Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 15432}}},
				{Cluster: "zone.b", Hostname: "db-1", Addrs: addrs("10.3.0.5"), Ports: []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}},
			},
		},
		"demo/empty": {Headless: true},
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

func TestRespondRules(t *testing.T) {
	soa := []string{"SOA clusterset.local. 5"}
	tests := []struct {
		name, qname string
		qtype       uint16
		rcode       int
		answer      []string
		ns          []string
		extra       []string
	}{
		{"clusterset ip A", "web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.0.0.10"}, nil, nil},
		{"clusterset ip AAAA", "web.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:10::10"}, nil, nil},
		{"other family is NODATA", "v4only.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, nil, soa, nil},
		{"case-insensitive, owner as asked", "WeB.DEMO.svc.ClusterSet.Local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.0.0.10"}, nil, nil},
		{"not imported is NXDOMAIN", "nope.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"other namespace is NXDOMAIN", "web.other.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"not under svc is NXDOMAIN", "web.demo.pod.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"srv of named port", "_http._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 80 web.demo.svc.clusterset.local."}, nil,
			[]string{"web.demo.svc.clusterset.local. A 10.0.0.10", "web.demo.svc.clusterset.local. AAAA fd00:10::10"}},
		{"srv of udp port", "_dns._udp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 53 web.demo.svc.clusterset.local."}, nil,
			[]string{"web.demo.svc.clusterset.local. A 10.0.0.10", "web.demo.svc.clusterset.local. AAAA fd00:10::10"}},
		{"srv with wrong protocol is NXDOMAIN", "_http._udp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, soa, nil},
		{"srv of unknown port is NXDOMAIN", "_grpc._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeNameError, nil, soa, nil},
		{"A on srv name is NODATA", "_http._tcp.web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"headless A spans clusters", "db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{"A 10.1.0.5", "A 10.1.0.6", "A 10.2.0.5", "A 10.3.0.5"}, nil, nil},
		{"headless AAAA", "db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"AAAA fd00:2::5"}, nil, nil},
		{"headless hostname in one cluster", "db-0.west.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.2.0.5"}, nil, nil},
		{"headless hostname in the other", "DB-0.East.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.1.0.5"}, nil, nil},
		{"headless hostname with dotted cluster id", "db-1.zone.b.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"A 10.3.0.5"}, nil, nil},
		{"headless hostname other family NODATA", "db-0.east.db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, nil, soa, nil},
		{"headless unknown hostname is NXDOMAIN", "db-9.east.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"hostname under clusterset ip import is NXDOMAIN", "db-0.east.web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"headless srv names endpoints with hostnames", "_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"SRV 15432 db-0.west.db.demo.svc.clusterset.local.", "SRV 5432 db-0.east.db.demo.svc.clusterset.local.", "SRV 5432 db-1.zone.b.db.demo.svc.clusterset.local."}, nil,
			[]string{"db-0.east.db.demo.svc.clusterset.local. A 10.1.0.5", "db-0.west.db.demo.svc.clusterset.local. A 10.2.0.5", "db-0.west.db.demo.svc.clusterset.local. AAAA fd00:2::5", "db-1.zone.b.db.demo.svc.clusterset.local. A 10.3.0.5"}},
		{"headless without endpoints is NODATA", "empty.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"namespace is an empty non-terminal", "demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"unknown namespace is NXDOMAIN", "other.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil, soa, nil},
		{"svc is an empty non-terminal", "svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"apex SOA", "clusterset.local.", dns.TypeSOA, dns.RcodeSuccess, soa, nil, nil},
		{"apex A is NODATA", "clusterset.local.", dns.TypeA, dns.RcodeSuccess, nil, soa, nil},
		{"name in the wrong zone is refused", "web.demo.svc.cluster.local.", dns.TypeA, dns.RcodeRefused, nil, nil, nil},
	}
	lookup := testLookup()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := new(dns.Msg).SetQuestion(tc.qname, tc.qtype)
			m := Respond(testZone, lookup, req)
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
				if rr.Header().Ttl != testZone.TTL {
					t.Errorf("TTL %d on %v, want %d", rr.Header().Ttl, rr, testZone.TTL)
				}
			}
			if _, err := m.Pack(); err != nil {
				t.Errorf("reply does not pack: %v", err)
			}
		})
	}
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
