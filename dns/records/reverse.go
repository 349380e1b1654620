package records

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// reverseAnswer resolves name (lower-case, inside the reverse zone z) for qtype: the reverse
// name of an imported address has one PTR record (specification 2.3.3 and 2.4.3), the reverse
// name of a prefix holding imported addresses exists without records (RFC 8020), and any other
// name does not exist. Whether another plugin's PTR record for the address wins is the
// plugin's decision, not this one: only it sees the rest of the server.
func reverseAnswer(z Zone, lookup Lookup, owner, name string, qtype uint16) reply {
	if name == z.Name {
		return apexReply(z, qtype)
	}
	prefix, ok := ParseReverse(name)
	if !ok {
		return reply{}
	}
	if !prefix.IsSingleIP() {
		return reply{exists: lookup.HasAddressIn(prefix)}
	}
	target, ok := PickPTR(lookup.AddressNames(prefix.Addr()))
	if !ok {
		return reply{}
	}
	if qtype != dns.TypePTR && qtype != dns.TypeANY {
		return nodata
	}
	clusterset := z.Clusterset
	if clusterset == "" {
		clusterset = DefaultClustersetZone
	}
	return reply{exists: true, answer: []dns.RR{&dns.PTR{
		Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: z.TTL},
		Ptr: target + "." + clusterset,
	}}}
}

// ParseReverse returns the addresses a reverse name (lower-case, fully qualified) stands for:
// one address for a complete name (four octets under in-addr.arpa, 32 nibbles under ip6.arpa),
// the prefix they share for a shorter one. It refuses anything else, such as labels with
// leading zeros, upper-case nibbles or RFC 2317 delegation names: no address has those as its
// reverse name.
func ParseReverse(name string) (netip.Prefix, bool) {
	switch {
	case name == "in-addr.arpa.":
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
	case name == "ip6.arpa.":
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
	case strings.HasSuffix(name, ".in-addr.arpa."):
		return parseV4Reverse(dns.SplitDomainName(strings.TrimSuffix(name, ".in-addr.arpa.")))
	case strings.HasSuffix(name, ".ip6.arpa."):
		return parseV6Reverse(dns.SplitDomainName(strings.TrimSuffix(name, ".ip6.arpa.")))
	}
	return netip.Prefix{}, false
}

func parseV4Reverse(labels []string) (netip.Prefix, bool) {
	if len(labels) > 4 {
		return netip.Prefix{}, false
	}
	var b [4]byte
	for i, label := range labels {
		// Labels run from the last octet to the first; a label is an octet in its canonical
		// decimal form, as netip would print it.
		octet, err := strconv.Atoi(label)
		if err != nil || octet < 0 || octet > 255 || strconv.Itoa(octet) != label {
			return netip.Prefix{}, false
		}
		b[len(labels)-1-i] = byte(octet)
	}
	return netip.PrefixFrom(netip.AddrFrom4(b), 8*len(labels)), true
}

func parseV6Reverse(labels []string) (netip.Prefix, bool) {
	if len(labels) > 32 {
		return netip.Prefix{}, false
	}
	var b [16]byte
	for i, label := range labels {
		if len(label) != 1 {
			return netip.Prefix{}, false
		}
		nibble := strings.IndexByte("0123456789abcdef", label[0])
		if nibble < 0 {
			return netip.Prefix{}, false
		}
		// The label furthest from the zone is the lowest nibble.
		pos := len(labels) - 1 - i
		if pos%2 == 0 {
			b[pos/2] |= byte(nibble) << 4
		} else {
			b[pos/2] |= byte(nibble)
		}
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), 4*len(labels)), true
}
