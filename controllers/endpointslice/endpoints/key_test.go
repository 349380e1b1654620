package endpoints

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestKeyOf(t *testing.T) {
	http, dns := port("http", 8080), port("dns", 53)
	udp := port("dns", 53)
	udp.Protocol = ptr.To(corev1.ProtocolUDP)
	withApp := port("http", 8080)
	withApp.AppProtocol = ptr.To("h2c")
	unnamed := port("", 8080)
	nilName := port("", 8080)
	nilName.Name = nil

	same := []struct {
		name string
		a, b []discoveryv1.EndpointPort
	}{
		{"order does not matter", []discoveryv1.EndpointPort{http, dns}, []discoveryv1.EndpointPort{dns, http}},
		{"nil and empty", nil, []discoveryv1.EndpointPort{}},
	}
	for _, tc := range same {
		if KeyOf(v4, tc.a) != KeyOf(v4, tc.b) {
			t.Errorf("%s: keys differ", tc.name)
		}
	}
	distinct := [][]discoveryv1.EndpointPort{
		nil, {http}, {dns}, {udp}, {withApp}, {unnamed}, {nilName}, {http, dns}, {http, http},
	}
	seen := map[string]int{}
	for i, ports := range distinct {
		for _, at := range []discoveryv1.AddressType{v4, v6} {
			key := KeyOf(at, ports)
			if !strings.HasPrefix(key, string(at)+"/") {
				t.Errorf("key %q does not start with its address type", key)
			}
			if j, dup := seen[key]; dup {
				t.Errorf("port lists %d and %d share key %q", j, i, key)
			}
			seen[key] = i
		}
	}
}

// The key must not change between releases: a restarted controller has to
// group the slices it wrote before exactly as it groups desired sets. These
// values are the documented encoding hashed by an independent tool
// (python3 hashlib.sha256 of `[+"http"+"TCP"+8080-]` and of “).
func TestKeyOfIsStable(t *testing.T) {
	golden := []struct {
		ports []discoveryv1.EndpointPort
		want  string
	}{
		{[]discoveryv1.EndpointPort{port("http", 8080)}, "IPv4/61fbc201b37931edeec9694b931bfdb6"},
		{nil, "IPv4/e3b0c44298fc1c149afbf4c8996fb924"},
	}
	for _, g := range golden {
		if got := KeyOf(v4, g.ports); got != g.want {
			t.Errorf("KeyOf(IPv4, %v) = %q, want %q", g.ports, got, g.want)
		}
	}
}

func TestSliceKeyMatchesSetKey(t *testing.T) {
	ports := []discoveryv1.EndpointPort{port("b", 2), port("a", 1)}
	sorted := SortPorts(ports)
	slice := &discoveryv1.EndpointSlice{AddressType: v6, Ports: ports}
	if SliceKey(slice) != KeyOf(v6, sorted) {
		t.Errorf("SliceKey differs from KeyOf of the sorted ports")
	}
	if SliceKey(nil) != "" {
		t.Errorf("SliceKey(nil) should be empty")
	}
	if *ports[0].Name != "b" {
		t.Errorf("SortPorts reordered its input")
	}
	if *sorted[0].Name != "a" || *sorted[1].Name != "b" {
		t.Errorf("SortPorts = %v, want a before b", sorted)
	}
}

func TestSortPortsOrder(t *testing.T) {
	nilName := port("", 1)
	nilName.Name = nil
	tcp80, udp53, tcp53 := port("x", 80), port("x", 53), port("x", 53)
	udp53.Protocol = ptr.To(corev1.ProtocolUDP)
	got := SortPorts([]discoveryv1.EndpointPort{udp53, tcp80, nilName, tcp53})
	want := []discoveryv1.EndpointPort{nilName, tcp53, tcp80, udp53}
	if !slices.EqualFunc(got, want, func(a, b discoveryv1.EndpointPort) bool { return comparePorts(a, b) == 0 }) {
		t.Errorf("SortPorts = %v, want unset name first, then protocol, then number", got)
	}
}

func TestPortsEqual(t *testing.T) {
	a, b := port("a", 1), port("b", 2)
	if !PortsEqual([]discoveryv1.EndpointPort{a, b}, []discoveryv1.EndpointPort{b, a}) {
		t.Errorf("same ports in another order should be equal")
	}
	if PortsEqual([]discoveryv1.EndpointPort{a}, []discoveryv1.EndpointPort{b}) {
		t.Errorf("different ports should differ")
	}
	if PortsEqual([]discoveryv1.EndpointPort{a, a}, []discoveryv1.EndpointPort{a}) {
		t.Errorf("different lengths should differ")
	}
	if !PortsEqual(nil, []discoveryv1.EndpointPort{}) {
		t.Errorf("nil and empty should be equal")
	}
}
