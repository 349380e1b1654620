package records

import (
	"net"
	"net/netip"
	"slices"
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
}

// Zone is one zone the plugin is authoritative for.
type Zone struct {
	// Name is the zone, fully qualified and lower-case, e.g. "clusterset.local.".
	Name string
	// TTL is given to every record, and is the SOA minimum, so negative answers are cached no
	// longer than positive ones.
	TTL uint32
	// Serial is the SOA serial: it changes when the imports change.
	Serial uint32
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
	ans := answer(z, lookup, q.Name, name, q.Qtype)
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

// answer resolves name (lower-case, inside z) for qtype; owner is the name as asked, so the
// answer keeps the client's spelling.
func answer(z Zone, lookup Lookup, owner, name string, qtype uint16) reply {
	rel := strings.TrimSuffix(strings.TrimSuffix(name, z.Name), ".")
	if rel == "" {
		if qtype == dns.TypeSOA || qtype == dns.TypeANY {
			return reply{exists: true, answer: []dns.RR{z.SOA()}}
		}
		return reply{exists: true}
	}
	labels := dns.SplitDomainName(rel)
	// Every name is under svc.<zone>: ..., <svc>, <ns>, "svc".
	n := len(labels)
	if n == 0 || labels[n-1] != "svc" {
		return reply{}
	}
	if n == 1 {
		return reply{exists: true}
	}
	namespace := labels[n-2]
	if n == 2 {
		return reply{exists: lookup.Namespace(namespace)}
	}
	svc, ok := lookup.Service(namespace, labels[n-3])
	if !ok {
		return reply{}
	}
	base := labels[n-3] + "." + namespace + ".svc." + z.Name
	prefix := labels[:n-3]
	switch {
	case len(prefix) == 0:
		return serviceReply(z, svc, owner, qtype)
	case len(prefix) == 2 && strings.HasPrefix(prefix[0], "_") && strings.HasPrefix(prefix[1], "_"):
		return srvReply(z, svc, owner, base, prefix[0][1:], prefix[1][1:], qtype)
	default:
		// <hostname>.<clusterid>: a cluster id may itself hold dots.
		return endpointReply(z, svc, owner, prefix[0], strings.Join(prefix[1:], "."), qtype)
	}
}

func serviceReply(z Zone, svc *Service, owner string, qtype uint16) reply {
	if !svc.Headless {
		return reply{exists: true, answer: addressRecords(z, owner, svc.IPs, qtype)}
	}
	var addrs []netip.Addr
	for _, e := range svc.Endpoints {
		addrs = append(addrs, e.Addrs...)
	}
	return reply{exists: true, answer: addressRecords(z, owner, addrs, qtype)}
}

// srvReply answers _<port>._<proto>.<svc>: the name exists while the import has such a named
// port; a ClusterSetIP SRV targets the Service name, a headless one every endpoint with a
// hostname. The additional section carries the targets' addresses.
func srvReply(z Zone, svc *Service, owner, base, portName, proto string, qtype uint16) reply {
	if portName == "" || proto == "" || !hasNamedPort(svc.Ports, portName, proto) && !endpointsHaveNamedPort(svc, portName, proto) {
		return reply{}
	}
	r := reply{exists: true}
	if qtype != dns.TypeSRV && qtype != dns.TypeANY {
		return r
	}
	if !svc.Headless {
		for _, p := range svc.Ports {
			if p.Name == portName && p.Protocol == proto {
				r.answer = append(r.answer, srv(z, owner, base, p.Port))
			}
		}
		if len(r.answer) > 0 {
			r.extra = addressRecords(z, base, svc.IPs, dns.TypeANY)
		}
		return r
	}
	for _, e := range svc.Endpoints {
		if e.Hostname == "" {
			continue
		}
		target := e.Hostname + "." + e.Cluster + "." + base
		for _, p := range e.Ports {
			if p.Name == portName && p.Protocol == proto {
				r.answer = appendUnique(r.answer, srv(z, owner, target, p.Port))
				r.extra = appendUniqueAll(r.extra, addressRecords(z, target, e.Addrs, dns.TypeANY))
			}
		}
	}
	return r
}

func endpointReply(z Zone, svc *Service, owner, hostname, cluster string, qtype uint16) reply {
	if !svc.Headless {
		return reply{}
	}
	var addrs []netip.Addr
	found := false
	for _, e := range svc.Endpoints {
		if e.Hostname == hostname && e.Cluster == cluster {
			found = true
			addrs = append(addrs, e.Addrs...)
		}
	}
	if !found {
		return reply{}
	}
	return reply{exists: true, answer: addressRecords(z, owner, addrs, qtype)}
}

func hasNamedPort(ports []Port, name, proto string) bool {
	return slices.ContainsFunc(ports, func(p Port) bool { return p.Name == name && p.Protocol == proto })
}

func endpointsHaveNamedPort(svc *Service, name, proto string) bool {
	if !svc.Headless {
		return false
	}
	return slices.ContainsFunc(svc.Endpoints, func(e Endpoint) bool { return e.Hostname != "" && hasNamedPort(e.Ports, name, proto) })
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

func srv(z Zone, owner, target string, port uint16) *dns.SRV {
	return &dns.SRV{
		Hdr:    dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: z.TTL},
		Port:   port,
		Target: target,
	}
}

func appendUnique(rrs []dns.RR, rr dns.RR) []dns.RR {
	for _, have := range rrs {
		if dns.IsDuplicate(have, rr) {
			return rrs
		}
	}
	return append(rrs, rr)
}

func appendUniqueAll(rrs []dns.RR, add []dns.RR) []dns.RR {
	for _, rr := range add {
		rrs = appendUnique(rrs, rr)
	}
	return rrs
}
