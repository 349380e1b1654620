package records

import (
	"strings"
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

// FuzzRespondWire feeds raw packets: whatever unpacks gets a reply that satisfies checkReply.
func FuzzRespondWire(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web.demo.svc.clusterset.local.", dns.TypeA},
		{"_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV},
		{"db-0.west.db.demo.svc.clusterset.local.", dns.TypeAAAA},
		{"clusterset.local.", dns.TypeSOA},
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
		checkReply(t, req, Respond(testZone, lookup, req))
	})
}

// FuzzRespondQuestion builds questions that no wire format would carry (empty labels, missing
// root, bytes outside names), so Respond is safe whatever a caller hands it.
func FuzzRespondQuestion(f *testing.F) {
	f.Add("web.demo.svc.clusterset.local.", dns.TypeA, uint16(dns.ClassINET))
	f.Add("..clusterset.local.", dns.TypeA, uint16(dns.ClassINET))
	f.Add("._._.web.demo.svc.clusterset.local", dns.TypeSRV, uint16(dns.ClassANY))
	f.Add("x.y.z.db.demo.svc.clusterset.local.", dns.TypeANY, uint16(dns.ClassINET))
	lookup := testLookup()
	f.Fuzz(func(t *testing.T, name string, qtype, qclass uint16) {
		req := &dns.Msg{Question: []dns.Question{{Name: name, Qtype: qtype, Qclass: qclass}}}
		req.Id = 7
		checkReply(t, req, Respond(testZone, lookup, req))
	})
}
