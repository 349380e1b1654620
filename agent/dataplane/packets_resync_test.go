package dataplane

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// TestKernelAffinitySurvivesFullSyncs sends real connections from a client with ClientIP
// affinity: it keeps its endpoint, by TCP and by UDP (maps of their own), across a periodic
// full resync and across an agent restart (a new Syncer on the same table), neither of which
// writes anything; and the restarted Syncer still moves the client when its endpoint goes.
// When a full sync rebuilt the table, the maps started empty and each protocol's next
// connection picked one of four endpoints anew: this passes by chance with a probability of
// 1/256.
func TestKernelAffinitySurvivesFullSyncs(t *testing.T) {
	requireKernel(t)
	for _, backend := range kernelBackends {
		t.Run(backend, func(t *testing.T) { affinitySurvives(t, newPacketLab(t, backend), backend) })
	}
}

func affinitySurvives(t *testing.T, l *packetLab, backend string) {
	clusterTCP, clusterUDP := net.JoinHostPort(pktClusterIP, "80"), net.JoinHostPort(pktClusterIP, "53")
	svc := pktService(pktEndpoints, false, false, time.Hour)
	l.sync(t, "affinity", svc)
	sticky := func(step, network, target string, among []string) string {
		t.Helper()
		got, _ := l.landings(t, network, target, 10)
		if len(got) != 1 || !slices.Contains(among, got[0]) {
			t.Fatalf("%s: %s %s landed on %v, want one endpoint of %v", step, network, target, got, among)
		}
		return got[0]
	}
	all := epNames(pktEndpoints...)
	tcp, udp := sticky("before", "tcp", clusterTCP, all), sticky("before", "udp", clusterUDP, all)
	full := func(step string) {
		t.Helper()
		var st Stats
		var err error
		l.node.do(func() { st, err = l.syncer.Sync(context.Background(), []Service{svc}, true) })
		if err != nil || !st.Full || st.Operations != 0 || st.Rebuilt != "" {
			t.Fatalf("%s: %+v %v, want a full sync that writes nothing", step, st, err)
		}
		if got := sticky(step, "tcp", clusterTCP, all); got != tcp {
			t.Errorf("%s: the TCP client moved from %s to %s", step, tcp, got)
		}
		if got := sticky(step, "udp", clusterUDP, all); got != udp {
			t.Errorf("%s: the UDP client moved from %s to %s", step, udp, got)
		}
	}
	full("periodic full resync")
	l.syncer, _ = openBackend(t, l.node, backend, knftables.IPv4Family,
		Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.210.1.0/24")}})
	full("agent restart")

	var rest []pktEndpoint
	for _, ep := range pktEndpoints {
		if ep.name != tcp {
			rest = append(rest, ep)
		}
	}
	l.sync(t, "the restarted Syncer: endpoint gone", pktService(rest, false, false, time.Hour))
	if got := sticky("after its endpoint went", "tcp", clusterTCP, epNames(rest...)); got == tcp {
		t.Errorf("the client stayed on %s, which is gone", tcp)
	}
}
