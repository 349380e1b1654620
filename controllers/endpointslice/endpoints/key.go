package endpoints

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// KeyOf returns the stable key of the slice set holding endpoints of
// addressType served on ports. The key does not depend on the order of
// ports, and nil and empty port lists give the same key.
//
// The key is "<addressType>/<32 hex digits>"; the digits are a SHA-256 prefix
// of an explicit, versionless encoding of the sorted ports (not a reflection
// dump), so the key stays the same across Go and Kubernetes library upgrades
// and a restarted controller groups existing slices exactly as before.
func KeyOf(addressType discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	sum := sha256.Sum256([]byte(canonicalPorts(ports)))
	return string(addressType) + "/" + hex.EncodeToString(sum[:16])
}

// SliceKey returns the key of the slice set an existing EndpointSlice belongs
// to, from its address type and ports, so a reconciler can group the slices it
// lists by the same keys Desired returns. A nil slice has the empty key, which
// no set uses.
func SliceKey(slice *discoveryv1.EndpointSlice) string {
	if slice == nil {
		return ""
	}
	return KeyOf(slice.AddressType, slice.Ports)
}

// SortPorts returns a sorted copy of ports. The order is by name, then
// protocol, then port number, then appProtocol, with unset fields first; it is
// the order Set.Ports uses.
func SortPorts(ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ports))
	for i := range ports {
		ports[i].DeepCopyInto(&out[i])
	}
	slices.SortStableFunc(out, comparePorts)
	return out
}

// PortsEqual reports whether a and b hold the same ports, ignoring order. A
// nil pointer field and a pointer to the zero value are different ports, as
// they are different objects to the API server.
func PortsEqual(a, b []discoveryv1.EndpointPort) bool {
	if len(a) != len(b) {
		return false
	}
	// Slices written from a set's ports list them in the same order; only
	// reordered lists need the canonical form.
	if slices.EqualFunc(a, b, func(x, y discoveryv1.EndpointPort) bool { return comparePorts(x, y) == 0 }) {
		return true
	}
	return canonicalPorts(a) == canonicalPorts(b)
}

// canonicalPorts encodes ports in sorted order. Every field is written with a
// presence marker and strings are quoted, so distinct port lists can never
// encode to the same text.
func canonicalPorts(ports []discoveryv1.EndpointPort) string {
	sorted := slices.Clone(ports)
	slices.SortStableFunc(sorted, comparePorts)
	var b strings.Builder
	for _, p := range sorted {
		b.WriteByte('[')
		writeOptionalString(&b, p.Name)
		if p.Protocol == nil {
			b.WriteString("-")
		} else {
			b.WriteString("+" + strconv.Quote(string(*p.Protocol)))
		}
		if p.Port == nil {
			b.WriteString("-")
		} else {
			b.WriteString("+" + strconv.FormatInt(int64(*p.Port), 10))
		}
		writeOptionalString(&b, p.AppProtocol)
		b.WriteByte(']')
	}
	return b.String()
}

func writeOptionalString(b *strings.Builder, s *string) {
	if s == nil {
		b.WriteString("-")
		return
	}
	b.WriteString("+" + strconv.Quote(*s))
}

func comparePorts(a, b discoveryv1.EndpointPort) int {
	if c := compareOptional(a.Name, b.Name); c != 0 {
		return c
	}
	if c := compareOptional(a.Protocol, b.Protocol); c != 0 {
		return c
	}
	if c := compareOptional(a.Port, b.Port); c != 0 {
		return c
	}
	return compareOptional(a.AppProtocol, b.AppProtocol)
}

// compareOptional orders unset before set, then by value.
func compareOptional[T cmp.Ordered](a, b *T) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return cmp.Compare(*a, *b)
}
