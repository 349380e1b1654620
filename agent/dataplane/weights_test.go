package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// Weights are expressed as repeated map elements: numgen picks an element uniformly, so an
// endpoint of weight 3 next to one of weight 1 gets three connections in four.
func TestWeightsRepeatMapElements(t *testing.T) {
	for _, affinity := range []time.Duration{0, time.Minute} {
		svc := Service{Namespace: "a", Name: "w", ClusterIPs: ips("10.96.0.1"), AffinityTimeout: affinity,
			Ports: []Port{{Name: "p", Protocol: TCP, Port: 80, Endpoints: []Endpoint{
				{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Weight: 3},
				{Addr: netip.MustParseAddrPort("10.0.0.2:80")},
			}}}}
		out, _, err := Render(context.Background(), []Service{svc}, Options{Family: knftables.IPv4Family})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "numgen random mod 4 ") {
			t.Errorf("affinity %v: want mod 4 in\n%s", affinity, out)
		}
		first, second := 0, 0
		mapName := sharedMapName(pickCluster, TCP) // with affinity too: a new client picks there
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "add element ip fleetslice "+mapName+" ") {
				continue
			}
			switch {
			case strings.Contains(line, "10.0.0.1"):
				first++
			case strings.Contains(line, "10.0.0.2"):
				second++
			}
		}
		if first != 3 || second != 1 {
			t.Errorf("affinity %v: want 3 and 1 elements, got %d and %d in\n%s", affinity, first, second, out)
		}
	}
}

func TestWeightsChangeTheFingerprintAndAreBounded(t *testing.T) {
	svc := tcpService("a", "w", "10.96.0.1", 80, "10.0.0.1:80", "10.0.0.2:80")
	heavier := tcpService("a", "w", "10.96.0.1", 80, "10.0.0.1:80", "10.0.0.2:80")
	heavier.Ports[0].Endpoints[0].Weight = 2
	if fingerprint(&svc) == fingerprint(&heavier) {
		t.Fatal("a weight change must change the fingerprint, or the sync would skip it")
	}
	var r rawHasher
	if r.digest(&svc) == r.digest(&heavier) {
		t.Fatal("a weight change must change the raw digest")
	}
	// Weight 0 and 1 are the same endpoint.
	one := tcpService("a", "w", "10.96.0.1", 80, "10.0.0.1:80", "10.0.0.2:80")
	one.Ports[0].Endpoints[0].Weight = 1
	if a, b := mustNormalize(t, svc), mustNormalize(t, one); fingerprint(&a) != fingerprint(&b) {
		t.Fatal("weights 0 and 1 must normalize alike")
	}
	huge := tcpService("a", "w", "10.96.0.1", 80, "10.0.0.1:80", "10.0.0.2:80")
	huge.Ports[0].Endpoints[0].Weight = 65535
	huge.Ports[0].Endpoints[1].Weight = 2
	if _, _, err := normalize(huge, ipv4); err == nil {
		t.Fatal("want weights above MaxDispatchElements refused")
	}
}

func mustNormalize(t *testing.T, svc Service) Service {
	t.Helper()
	out, ok, err := normalize(svc, ipv4)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	return out
}
