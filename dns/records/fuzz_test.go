package records

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// checkReply holds what every reply must satisfy, whatever was asked.
func checkReply(t *testing.T, req, m *dns.Msg) {
	t.Helper()
	if m == nil {
		t.Fatal("no reply")
	}
	if m.Id != req.Id || !m.Response {
		t.Fatalf("reply id %d response %v, query id %d", m.Id, m.Response, req.Id)
	}
	switch m.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
		if len(req.Question) != 1 {
			t.Fatalf("answered %d questions with %s", len(req.Question), dns.RcodeToString[m.Rcode])
		}
		if len(m.Answer) == 0 && (len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA) {
			t.Fatalf("negative answer without the zone's SOA: %v", m)
		}
		for _, rr := range m.Answer {
			if rr.Header().Rrtype != dns.TypeSOA && rr.Header().Name != req.Question[0].Name {
				t.Fatalf("answer owner %q, question %q", rr.Header().Name, req.Question[0].Name)
			}
		}
	case dns.RcodeFormatError, dns.RcodeRefused, dns.RcodeNotImplemented:
		if len(m.Answer) != 0 {
			t.Fatalf("error reply %s carries answers", dns.RcodeToString[m.Rcode])
		}
	default:
		t.Fatalf("unexpected rcode %s", dns.RcodeToString[m.Rcode])
	}
	if _, err := req.Pack(); err == nil {
		if _, err := m.Pack(); err != nil {
			t.Fatalf("reply to a valid query does not pack: %v", err)
		}
	}
}

// addressesOf asks name for A and AAAA in its zone and returns the addresses answered.
func addressesOf(lookup Lookup, name string) (got []netip.Addr, exists bool) {
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m := Respond(zoneFor(name), lookup, new(dns.Msg).SetQuestion(name, qtype))
		exists = m.Rcode == dns.RcodeSuccess
		got = append(got, recordAddrs(m.Answer)...)
	}
	slices.SortFunc(got, netip.Addr.Compare)
	return got, exists
}

func recordAddrs(rrs []dns.RR) []netip.Addr {
	var out []netip.Addr
	for _, rr := range rrs {
		switch r := rr.(type) {
		case *dns.A:
			a, _ := netip.AddrFromSlice(r.A.To4())
			out = append(out, a)
		case *dns.AAAA:
			a, _ := netip.AddrFromSlice(r.AAAA)
			out = append(out, a)
		}
	}
	return out
}

// testKnownNames is knownNames of testLookup, which every caller of checkConsistent asks.
var testKnownNames = sync.OnceValue(func() []string { return knownNames(testLookup()) })

// checkConsistent holds what a reply must agree with in the rest of the zone:
//   - RFC 8020: a name denied with NXDOMAIN has no name with records at or below it;
//   - an SRV target exists, and the additional section gives exactly its addresses;
//   - a PTR target, asked for its addresses, answers the address of the reverse name
//     (forward-confirmed reverse DNS).
func checkConsistent(t *testing.T, lookup mapLookup, req, m *dns.Msg) {
	t.Helper()
	if len(req.Question) != 1 {
		return
	}
	qname := strings.ToLower(dns.Fqdn(req.Question[0].Name))
	if m.Rcode == dns.RcodeNameError {
		if _, ok := dns.IsDomainName(qname); !ok {
			return
		}
		for _, known := range testKnownNames() {
			if dns.IsSubDomain(qname, known) {
				t.Fatalf("%s is NXDOMAIN, but %s exists below it", qname, known)
			}
		}
	}
	extra := map[string][]netip.Addr{}
	for _, rr := range m.Extra {
		extra[rr.Header().Name] = append(extra[rr.Header().Name], recordAddrs([]dns.RR{rr})...)
	}
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.SRV:
			got, exists := addressesOf(lookup, r.Target)
			want := extra[r.Target]
			slices.SortFunc(want, netip.Addr.Compare)
			if !exists || !slices.Equal(got, want) {
				t.Fatalf("SRV target %s answers %v (exists %v), additional section says %v", r.Target, got, exists, want)
			}
		case *dns.PTR:
			prefix, ok := ParseReverse(qname)
			got, _ := addressesOf(lookup, r.Ptr)
			if !ok || !slices.Contains(got, prefix.Addr()) {
				t.Fatalf("PTR %s -> %s, which answers %v", qname, r.Ptr, got)
			}
		}
	}
}

// FuzzRespondWire feeds raw packets: whatever unpacks gets a reply that satisfies checkReply
// and checkConsistent, in the zone of its name.
func FuzzRespondWire(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web.demo.svc.clusterset.local.", dns.TypeA},
		{"web.demo.svc.clusterset.local.", dns.TypeSRV},
		{"_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV},
		{"db-0.west.db.demo.svc.clusterset.local.", dns.TypeAAAA},
		{"east.db.demo.svc.clusterset.local.", dns.TypeA},
		{"dns-version.clusterset.local.", dns.TypeTXT},
		{"clusterset.local.", dns.TypeSOA},
		{"5.0.1.10.in-addr.arpa.", dns.TypePTR},
		{"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.2.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR},
		{strings.Repeat("a.", 120) + "clusterset.local.", dns.TypeA},
	} {
		wire, err := new(dns.Msg).SetQuestion(q.name, q.qtype).Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(wire)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0})
	lookup := testLookup()
	f.Fuzz(func(t *testing.T, wire []byte) {
		req := new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			return
		}
		z := testZone
		if len(req.Question) == 1 {
			z = zoneFor(req.Question[0].Name)
		}
		m := Respond(z, lookup, req)
		checkReply(t, req, m)
		checkConsistent(t, lookup, req, m)
	})
}

// FuzzRespondQuestion builds questions that no wire format would carry (empty labels, missing
// root, bytes outside names), so Respond is safe whatever a caller hands it.
func FuzzRespondQuestion(f *testing.F) {
	f.Add("web.demo.svc.clusterset.local.", dns.TypeA, uint16(dns.ClassINET))
	f.Add("..clusterset.local.", dns.TypeA, uint16(dns.ClassINET))
	f.Add("._._.web.demo.svc.clusterset.local", dns.TypeSRV, uint16(dns.ClassANY))
	f.Add("x.y.z.db.demo.svc.clusterset.local.", dns.TypeANY, uint16(dns.ClassINET))
	f.Add("zone.b.db.demo.svc.clusterset.local.", dns.TypeSRV, uint16(dns.ClassINET))
	f.Add("..10.in-addr.arpa.", dns.TypePTR, uint16(dns.ClassINET))
	f.Add("d.f.ip6.arpa", dns.TypeANY, uint16(dns.ClassINET))
	lookup := testLookup()
	f.Fuzz(func(t *testing.T, name string, qtype, qclass uint16) {
		req := &dns.Msg{Question: []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}}
		req.Id = 7
		m := Respond(zoneFor(name), lookup, req)
		checkReply(t, req, m)
		checkConsistent(t, lookup, req, m)
	})
}
