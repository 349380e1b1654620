package records

import (
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Lookup finds imported Services. Implementations answer from memory: Respond calls it on every
// query.
type Lookup interface {
	// Service returns the Service namespace/name, or false when it is not imported.
	Service(namespace, name string) (*Service, bool)
	// Namespace reports whether any Service of namespace is imported, which makes
	// <ns>.svc.<zone> a name that exists without records of its own.
	Namespace(namespace string) bool
	// AddressNames returns the names (relative to the clusterset zone, see AddressName) of every
	// imported Service and headless endpoint that has addr, in any order.
	AddressNames(addr netip.Addr) []string
	// HasAddressIn reports whether any imported address lies in prefix, which makes the reverse
	// name of the prefix exist without records of its own.
	HasAddressIn(prefix netip.Prefix) bool
}

// SchemaVersion is the version of the multi-cluster DNS specification the zone answers to,
// published at dns-version.<zone> (specification 2.2).
const SchemaVersion = "1.0.0"

// schemaVersionTTL is the TTL of the dns-version record: CoreDNS's kubernetes plugin's and the
// specification's example, as the version does not change while a server runs.
const schemaVersionTTL = 28800

// DefaultClustersetZone is the zone the specification fixes (2.1): reverse answers point into it
// when a Zone does not say otherwise.
const DefaultClustersetZone = "clusterset.local."

// Zone is one zone the plugin is authoritative for.
type Zone struct {
	// Name is the zone, fully qualified and lower-case, e.g. "clusterset.local." or, for PTR
	// records, "in-addr.arpa." or "ip6.arpa.".
	Name string
	// TTL is given to every record, and is the SOA minimum, so negative answers are cached no
	// longer than positive ones.
	TTL uint32
	// Serial is the SOA serial: it changes when the imports change.
	Serial uint32
	// Clusterset is the clusterset zone PTR records point into; DefaultClustersetZone when
	// empty. Only reverse zones use it.
	Clusterset string
}

// SOA returns the zone's start of authority.
func (z Zone) SOA() *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: z.Name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: z.TTL},
		Ns:      "ns.dns." + z.Name,
		Mbox:    "hostmaster." + z.Name,
		Serial:  z.Serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  z.TTL,
	}
}

// IsReverse reports whether zone (fully qualified, any case) holds reverse names, where the
// zone answers PTR records for imported addresses instead of Service names.
func IsReverse(zone string) bool {
	zone = strings.ToLower(dns.Fqdn(zone))
	return dns.IsSubDomain("in-addr.arpa.", zone) || dns.IsSubDomain("ip6.arpa.", zone)
}

// Respond returns the reply to req for the zone z. It never fails: a query it cannot answer gets
// an error reply (FORMERR for anything but one question, NOTIMP for other opcodes, REFUSED for
// other classes or names outside the zone).
func Respond(z Zone, lookup Lookup, req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if req.Opcode != dns.OpcodeQuery {
		m.Authoritative = false
		return setRcode(m, dns.RcodeNotImplemented)
	}
	if len(req.Question) != 1 {
		m.Authoritative = false
		return setRcode(m, dns.RcodeFormatError)
	}
	q := req.Question[0]
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Authoritative = false
		return setRcode(m, dns.RcodeRefused)
	}
	name := strings.ToLower(dns.Fqdn(q.Name))
	if !dns.IsSubDomain(z.Name, name) {
		m.Authoritative = false
		return setRcode(m, dns.RcodeRefused)
	}
	var ans reply
	if IsReverse(z.Name) {
		ans = reverseAnswer(z, lookup, q.Name, name, q.Qtype)
	} else {
		ans = forwardAnswer(z, lookup, q.Name, name, q.Qtype)
	}
	m.Answer, m.Extra = ans.answer, ans.extra
	if !ans.exists {
		m.Rcode = dns.RcodeNameError
	}
	if len(m.Answer) == 0 {
		m.Ns = []dns.RR{z.SOA()}
	}
	return m
}

func setRcode(m *dns.Msg, rcode int) *dns.Msg {
	m.Rcode = rcode
	return m
}

// reply is what one name and type resolve to; exists is false for a name the zone does not
// have (NXDOMAIN), true with no answer for a name without records of the type asked (NODATA).
type reply struct {
	exists        bool
	answer, extra []dns.RR
}

// nodata is the reply for a name that exists without records of the type asked, among them
// the empty non-terminals RFC 8020 forbids to deny: names with nothing but names below them.
var nodata = reply{exists: true}

// apexReply answers the zone's own name: its SOA, nothing else.
func apexReply(z Zone, qtype uint16) reply {
	if qtype == dns.TypeSOA || qtype == dns.TypeANY {
		return reply{exists: true, answer: []dns.RR{z.SOA()}}
	}
	return nodata
}

// addressRecords returns A records for qtype A, AAAA for AAAA and both for ANY, one per distinct
// address, in the order given.
func addressRecords(z Zone, owner string, addrs []netip.Addr, qtype uint16) []dns.RR {
	wantV4 := qtype == dns.TypeA || qtype == dns.TypeANY
	wantV6 := qtype == dns.TypeAAAA || qtype == dns.TypeANY
	var out []dns.RR
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		hdr := dns.RR_Header{Name: owner, Class: dns.ClassINET, Ttl: z.TTL}
		switch {
		case a.Is4() && wantV4:
			hdr.Rrtype = dns.TypeA
			out = append(out, &dns.A{Hdr: hdr, A: net.IP(a.AsSlice())})
		case a.Is6() && wantV6:
			hdr.Rrtype = dns.TypeAAAA
			out = append(out, &dns.AAAA{Hdr: hdr, AAAA: net.IP(a.AsSlice())})
		}
	}
	return out
}

// srv returns an SRV record with priority and weight 0: the specification leaves them to the
// implementation, and equal values let clients spread load evenly (RFC 2782).
func srv(z Zone, owner, target string, port uint16) *dns.SRV {
	return &dns.SRV{
		Hdr:    dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: z.TTL},
		Port:   port,
		Target: target,
	}
}
