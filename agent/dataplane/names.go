package dataplane

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// family holds what differs between the ip and ip6 tables.
type family struct {
	nft      knftables.Family
	rs       ruleset.Family
	addr     ruleset.Type // set key type of an address
	loopback netip.Prefix // the addresses NodePorts never answer on
}

var (
	ipv4 = family{knftables.IPv4Family, ruleset.IPv4, ruleset.IPv4Addr, netip.MustParsePrefix("127.0.0.0/8")}
	ipv6 = family{knftables.IPv6Family, ruleset.IPv6, ruleset.IPv6Addr, netip.MustParsePrefix("::1/128")}
)

func familyFor(f knftables.Family) (family, bool) {
	switch f {
	case knftables.IPv4Family, "":
		return ipv4, true
	case knftables.IPv6Family:
		return ipv6, true
	}
	return family{}, false
}

func (f family) contains(ip netip.Addr) bool {
	if f.rs == ruleset.IPv4 {
		return ip.Is4()
	}
	return ip.Is6()
}

// Names of the fixed objects of the table.
const (
	chainNATPrerouting   = "nat-prerouting"
	chainNATOutput       = "nat-output"
	chainNATPostrouting  = "nat-postrouting"
	chainFilterInput     = "filter-input"
	chainFilterForward   = "filter-forward"
	chainFilterOutput    = "filter-output"
	chainServices        = "services"
	chainEndpointChecks  = "endpoint-checks"
	chainNodePortChecks  = "nodeport-checks"
	chainReject          = "reject-service"
	chainMasquerading    = "masquerading"
	chainMarkMasquerade  = "mark-for-masquerade"
	chainClusterMasq     = "cluster-masquerade"
	chainClusterDispatch = "cluster-dispatch"
	chainAffinityRecord  = "affinity-record"
	mapAffinityEndpoints = "affinity-endpoints"
	setClusterPorts      = "cluster-ports"
	mapServiceIPs        = "service-ips"
	mapServiceNodePorts  = "service-nodeports"
	setNoEndpointIPs     = "no-endpoint-services"
	setNoEndpointPorts   = "no-endpoint-nodeports"
	setNoLocalPorts      = "no-local-endpoint-nodeports"
	setHairpin           = "hairpin-endpoints"
	setPodCIDRs          = "pod-cidrs"
	maxObjectNameLength  = 96
	nameHashAlphabet     = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
)

var nameEncoding = base32.NewEncoding(nameHashAlphabet).WithPadding(base32.NoPadding)

// objectName builds a stable name "<kind>-<hash>-<readable>": the hash of the
// full identity keeps names unique however the readable part is cut to fit,
// and the readable part tells an operator reading `nft list table` which
// Service a chain belongs to.
func objectName(kind string, identity ...string) string {
	h := sha256.New()
	for _, part := range identity {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	prefix := kind + "-" + nameEncoding.EncodeToString(sum[:8])[:12] + "-"
	readable := sanitize(strings.Join(identity, "/"))
	if room := maxObjectNameLength - len(prefix); len(readable) > room {
		readable = readable[:room]
	}
	return prefix + readable
}

// sanitize keeps characters that nft accepts in an unquoted identifier, so a
// strange name from a buggy caller cannot break the whole transaction.
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '/', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

func portLabel(p Port) string {
	if p.Name == "" {
		return "_"
	}
	return p.Name
}

func serviceChainName(svc *Service, p Port) string {
	return objectName("svc", svc.Namespace, svc.Name, string(p.Protocol), portLabel(p))
}

func externalChainName(svc *Service, p Port) string {
	return objectName("ext", svc.Namespace, svc.Name, string(p.Protocol), portLabel(p))
}

// affinityMapName names a port's map of known clients to their endpoints' addresses (external:
// the one of this node's endpoints for externalTrafficPolicy: Local); affinityPortMapName the
// map of the same clients to their endpoints' ports. The names include the timeout: the kernel
// keeps a map's timeout for life, so a new timeout needs new maps.
func affinityMapName(svc *Service, p Port, external bool) string {
	return objectName(affinityKind("aff", external), affinityIdentity(svc, p)...)
}

func affinityPortMapName(svc *Service, p Port, external bool) string {
	return objectName(affinityKind("affp", external), affinityIdentity(svc, p)...)
}

func affinityKind(kind string, external bool) string {
	if external {
		return "x" + kind
	}
	return kind
}

func affinityIdentity(svc *Service, p Port) []string {
	return []string{svc.Namespace, svc.Name, string(p.Protocol), portLabel(p),
		strconv.FormatInt(int64(svc.AffinityTimeout.Seconds()), 10)}
}

// recordChainName names the chain that records clients in the affinity maps named (addresses
// maps, sorted): one chain serves every endpoint that records in the same maps.
func recordChainName(maps []string) string {
	return objectName("rec", maps...)
}
