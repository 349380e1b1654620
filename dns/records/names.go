package records

import (
	"net/netip"
	"strconv"
	"strings"
)

// AddressLabel is the identifier an endpoint without a hostname gets in its name, derived from
// its address the way CoreDNS's kubernetes plugin names such endpoints in cluster.local: the
// address in canonical text with dots and colons turned into dashes (10.1.0.6 is 10-1-0-6,
// fd00::6 is fd00--6), and a 0 appended when that would end in a dash (fd00:: is fd00--0), as a
// label may not.
//
// It depends on nothing but the address, so it is the same after a restart of the plugin or of
// the controllers that write the slices, on every replica, and for every spelling of the
// address in the slice. Two endpoints of one cluster and Service with the same address are the
// same endpoint seen twice (a slice being rewritten) and share it. A label never holds an "x",
// which nameEndpoints relies on.
func AddressLabel(addr netip.Addr) string {
	label := strings.NewReplacer(".", "-", ":", "-").Replace(addr.WithZone("").String())
	if strings.HasSuffix(label, "-") {
		label += "0"
	}
	return label
}

// nameEndpoints gives every endpoint without a hostname its identifier. A hostname from the
// slice always keeps its name: the specification (2.1) has implementations prefer it. When an
// endpoint of the same cluster already holds the identifier as its hostname, the identifier gets
// "-x2", "-x3" and so on until it is free. The suffix holds an "x", which no AddressLabel
// contains, so it cannot take another address's identifier either; and it depends only on the
// hostnames in that cluster, so it too is the same on every replica and after every restart.
func nameEndpoints(endpoints []Endpoint) {
	taken := map[string]bool{}
	for _, e := range endpoints {
		if e.Hostname != "" {
			taken[e.Cluster+"/"+e.Hostname] = true
		}
	}
	for i, e := range endpoints {
		if e.Hostname != "" {
			continue
		}
		base := AddressLabel(e.Addrs[0])
		id := base
		for n := 2; taken[e.Cluster+"/"+id]; n++ {
			id = base + "-x" + strconv.Itoa(n)
		}
		endpoints[i].Hostname = id
	}
}

// AddressName pairs an address with the name its PTR record points to, relative to the
// clusterset zone: <service>.<ns>.svc for a clusterset IP (specification 2.3.3) and
// <hostname>.<cluster>.<service>.<ns>.svc for a ready endpoint of a headless import (2.4.3).
type AddressName struct {
	Addr netip.Addr
	Name string
}

// AddressNames returns the PTR data the Service namespace/name contributes, one entry per
// distinct address and name.
func (s *Service) AddressNames(namespace, name string) []AddressName {
	service := name + "." + namespace + ".svc"
	var out []AddressName
	seen := map[AddressName]bool{}
	add := func(a AddressName) {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, ip := range s.IPs {
		add(AddressName{Addr: ip, Name: service})
	}
	if s.Headless {
		for _, e := range s.Endpoints {
			for _, a := range e.Addrs {
				add(AddressName{Addr: a, Name: e.Hostname + "." + e.Cluster + "." + service})
			}
		}
	}
	return out
}

// PickPTR chooses the one name an address's PTR record points to among the names of every
// Service that has the address: the specification (2.3.3, 2.4.3) allows one PTR record per
// address. The lowest name in byte order wins, so the choice does not depend on the order the
// imports arrived in.
func PickPTR(names []string) (string, bool) {
	if len(names) == 0 {
		return "", false
	}
	best := names[0]
	for _, n := range names[1:] {
		if n < best {
			best = n
		}
	}
	return best, true
}
