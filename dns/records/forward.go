package records

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// forwardAnswer resolves name (lower-case, inside the clusterset zone z) for qtype; owner is the
// name as asked, so the answer keeps the client's spelling. The names are the specification's:
//
//	dns-version.<zone>                                    TXT (2.2)
//	<svc>.<ns>.svc.<zone>                                 A, AAAA (2.3.1, 2.4.1), SRV per port
//	_<port>._<proto>.<svc>.<ns>.svc.<zone>                SRV (2.3.2, 2.4.2)
//	<hostname>.<clusterid>.<svc>.<ns>.svc.<zone>          A, AAAA of a headless endpoint (2.4.1)
//
// and every name above one of them exists without records (RFC 8020).
func forwardAnswer(z Zone, lookup Lookup, owner, name string, qtype uint16) reply {
	rel := strings.TrimSuffix(strings.TrimSuffix(name, z.Name), ".")
	if rel == "" {
		return apexReply(z, qtype)
	}
	labels := dns.SplitDomainName(rel)
	n := len(labels)
	if n == 1 && labels[0] == "dns-version" {
		return versionReply(owner, qtype)
	}
	// Every other name is under svc.<zone>: ..., <svc>, <ns>, "svc".
	if n == 0 || labels[n-1] != "svc" {
		return reply{}
	}
	if n == 1 {
		return nodata
	}
	namespace := labels[n-2]
	if n == 2 {
		return reply{exists: lookup.Namespace(namespace)}
	}
	svc, ok := lookup.Service(namespace, labels[n-3])
	if !ok || !svc.Exists() {
		return reply{}
	}
	base := labels[n-3] + "." + namespace + ".svc." + z.Name
	below := labels[:n-3]
	switch {
	case len(below) == 0:
		return serviceReply(z, svc, owner, base, qtype)
	case len(below) == 2 && strings.HasPrefix(below[0], "_") && strings.HasPrefix(below[1], "_") && srvNameExists(svc, below[0][1:], below[1][1:]):
		return srvReply(z, svc, owner, base, below[0][1:], below[1][1:], qtype)
	}
	// <hostname>.<clusterid>, where a cluster id may itself hold dots.
	rest := strings.Join(below, ".")
	if r, ok := endpointReply(z, svc, owner, rest, qtype); ok {
		return r
	}
	if isEmptyNonTerminal(svc, rest) {
		return nodata
	}
	return reply{}
}

// versionReply answers dns-version.<zone>: the schema version as TXT, NODATA for other types.
func versionReply(owner string, qtype uint16) reply {
	if qtype != dns.TypeTXT && qtype != dns.TypeANY {
		return nodata
	}
	return reply{exists: true, answer: []dns.RR{&dns.TXT{
		Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: schemaVersionTTL},
		Txt: []string{SchemaVersion},
	}}}
}

// serviceReply answers the Service's own name: its clusterset IPs or every ready endpoint's
// addresses, and for SRV what CoreDNS's kubernetes plugin answers at a cluster.local Service
// name: one record per port (named or not) targeting the Service name for a ClusterSetIP
// import, one per endpoint and port targeting the endpoint's name for a headless one.
func serviceReply(z Zone, svc *Service, owner, base string, qtype uint16) reply {
	if qtype == dns.TypeSRV {
		var s srvSet
		if !svc.Headless {
			for _, p := range svc.Ports {
				s.add(z, owner, base, p.Port, svc.IPs)
			}
			return s.reply()
		}
		for _, e := range svc.Endpoints {
			for _, p := range e.Ports {
				s.add(z, owner, e.Hostname+"."+e.Cluster+"."+base, p.Port, e.Addrs)
			}
		}
		return s.reply()
	}
	if !svc.Headless {
		return reply{exists: true, answer: addressRecords(z, owner, svc.IPs, qtype)}
	}
	var addrs []netip.Addr
	for _, e := range svc.Endpoints {
		addrs = append(addrs, e.Addrs...)
	}
	return reply{exists: true, answer: addressRecords(z, owner, addrs, qtype)}
}

// srvNameExists reports whether _<port>._<proto> names an SRV record set of svc: a named port of
// the import, or of a ready endpoint's slice for a headless import.
func srvNameExists(svc *Service, portName, proto string) bool {
	if portName == "" || proto == "" {
		return false
	}
	if hasNamedPort(svc.Ports, portName, proto) {
		return true
	}
	if !svc.Headless {
		return false
	}
	for _, e := range svc.Endpoints {
		if hasNamedPort(e.Ports, portName, proto) {
			return true
		}
	}
	return false
}

// srvReply answers _<port>._<proto>.<svc>: a ClusterSetIP SRV targets the Service name, a
// headless one every ready endpoint's name, with the port that endpoint's cluster serves. The
// additional section carries the targets' addresses.
func srvReply(z Zone, svc *Service, owner, base, portName, proto string, qtype uint16) reply {
	if qtype != dns.TypeSRV && qtype != dns.TypeANY {
		return nodata
	}
	var s srvSet
	if !svc.Headless {
		for _, p := range svc.Ports {
			if p.Name == portName && p.Protocol == proto {
				s.add(z, owner, base, p.Port, svc.IPs)
			}
		}
		return s.reply()
	}
	for _, e := range svc.Endpoints {
		for _, p := range e.Ports {
			if p.Name == portName && p.Protocol == proto {
				s.add(z, owner, e.Hostname+"."+e.Cluster+"."+base, p.Port, e.Addrs)
			}
		}
	}
	return s.reply()
}

// endpointReply answers <hostname>.<clusterid> below a headless Service, given as rest; false
// when no endpoint has that name.
func endpointReply(z Zone, svc *Service, owner, rest string, qtype uint16) (reply, bool) {
	if !svc.Headless {
		return reply{}, false
	}
	var addrs []netip.Addr
	found := false
	for _, e := range svc.Endpoints {
		if endpointName(e) == rest {
			found = true
			addrs = append(addrs, e.Addrs...)
		}
	}
	if !found {
		return reply{}, false
	}
	return reply{exists: true, answer: addressRecords(z, owner, addrs, qtype)}, true
}

// isEmptyNonTerminal reports whether rest (the labels below the Service, joined) has names below
// it: <clusterid>.<svc> over its endpoints (a name that has no records of its own, as 2.3.4 and
// 2.4.4 require, yet exists), the parts of a dotted cluster id, and _<proto>.<svc> over its SRV
// names.
func isEmptyNonTerminal(svc *Service, rest string) bool {
	suffix := "." + rest
	for _, p := range svc.Ports {
		if p.Name != "" && strings.HasSuffix("_"+p.Name+"._"+p.Protocol, suffix) {
			return true
		}
	}
	if !svc.Headless {
		return false
	}
	for _, e := range svc.Endpoints {
		if strings.HasSuffix(endpointName(e), suffix) {
			return true
		}
		for _, p := range e.Ports {
			if p.Name != "" && strings.HasSuffix("_"+p.Name+"._"+p.Protocol, suffix) {
				return true
			}
		}
	}
	return false
}

// endpointName is an endpoint's name relative to its Service: <hostname>.<clusterid>.
func endpointName(e Endpoint) string { return e.Hostname + "." + e.Cluster }

func hasNamedPort(ports []Port, name, proto string) bool {
	for _, p := range ports {
		if p.Name == name && p.Protocol == proto {
			return true
		}
	}
	return false
}

// srvSet collects SRV records and their targets' addresses without duplicates: the same target
// and port reached twice (two protocols on one port number, an endpoint in two slices) is one
// record, as in CoreDNS's kubernetes plugin.
type srvSet struct {
	answer, extra []dns.RR
	seenSRV       map[srvKey]bool
	seenAddr      map[addrKey]bool
}

type srvKey struct {
	target string
	port   uint16
}

type addrKey struct {
	target string
	addr   netip.Addr
}

func (s *srvSet) add(z Zone, owner, target string, port uint16, addrs []netip.Addr) {
	if s.seenSRV == nil {
		s.seenSRV, s.seenAddr = map[srvKey]bool{}, map[addrKey]bool{}
	}
	if k := (srvKey{target, port}); !s.seenSRV[k] {
		s.seenSRV[k] = true
		s.answer = append(s.answer, srv(z, owner, target, port))
	}
	for _, a := range addrs {
		if k := (addrKey{target, a}); !s.seenAddr[k] {
			s.seenAddr[k] = true
			s.extra = append(s.extra, addressRecords(z, target, []netip.Addr{a}, dns.TypeANY)...)
		}
	}
}

func (s *srvSet) reply() reply { return reply{exists: true, answer: s.answer, extra: s.extra} }
