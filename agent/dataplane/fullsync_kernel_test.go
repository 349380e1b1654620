package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// fullSyncServices are Services of every rendered shape in family: affinity (with a Local
// NodePort), externalTrafficPolicy Local, several protocols, NodePorts, no endpoints.
func fullSyncServices(family knftables.Family) ([]Service, Options) {
	if family == knftables.IPv4Family {
		return append(goldenServices(), maxLengthService(family)), Options{Family: family, PodCIDRs: goldenPodCIDRs}
	}
	return []Service{maxLengthService(family),
		{Namespace: "six", Name: "web", ClusterIPs: ips("fd00:96::20"), Ports: []Port{
			{Name: "http", Protocol: TCP, Port: 80, NodePort: 30080, Endpoints: eps("[fd00:244::7]:8080", "[fd00:244::8]:8080")},
			{Name: "dns", Protocol: UDP, Port: 53, Endpoints: eps("[fd00:244::7]:53")},
		}},
		{Namespace: "six", Name: "sticky", ClusterIPs: ips("fd00:96::30"), AffinityTimeout: time.Minute, Ports: []Port{
			{Name: "s", Protocol: SCTP, Port: 9, NodePort: 30090, ExternalLocal: true,
				Endpoints:         []Endpoint{{Addr: netip.MustParseAddrPort("[fd00:244::9]:99"), Local: true}, {Addr: netip.MustParseAddrPort("[fd00:244::a]:99")}},
				ExternalEndpoints: []Endpoint{{Addr: netip.MustParseAddrPort("[fd00:244::9]:99"), Local: true}}},
		}},
		{Namespace: "six", Name: "gone", ClusterIPs: ips("fd00:96::40"), Ports: []Port{{Name: "x", Protocol: TCP, Port: 1, NodePort: 30001}}},
	}, Options{Family: family, PodCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:244::/48")}}
}

// TestKernelUnchangedFullSyncWritesNothing: through either backend and in either family, a full
// sync of an unchanged table writes nothing, and neither does the first full sync of a new
// Syncer (an agent restart) on it through the same backend. Both backends read the table back
// over netlink, and a table reads alike whichever wrote it but for the endpoint maps' key type,
// so a switch of backend rebuilds it once. The adopting Syncer then works incrementally, and its
// drift check finds the table as it left it.
func TestKernelUnchangedFullSyncWritesNothing(t *testing.T) {
	requireKernel(t)
	for _, family := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		for _, backend := range kernelBackends {
			t.Run(string(family)+"/"+backend, func(t *testing.T) { unchangedFullSync(t, family, backend) })
		}
	}
}

func unchangedFullSync(t *testing.T, family knftables.Family, backend string) {
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "fullsync"))
	services, opts := fullSyncServices(family)
	s, _ := openBackend(t, ns, backend, family, opts)
	ctx := context.Background()
	list := func() string {
		var out string
		ns.do(func() { out = run(t, "nft", "list", "table", string(family), TableName) })
		return out
	}
	sync := func(s *Syncer, full bool) Stats {
		t.Helper()
		var st Stats
		var err error
		ns.do(func() { st, err = s.Sync(ctx, services, full) })
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := sync(s, true); st.Rebuilt != "no table" {
		t.Fatalf("cold sync: %+v", st)
	}
	before := list()
	if st := sync(s, true); st.Operations != 0 || st.Rebuilt != "" {
		t.Fatalf("full sync of an unchanged table: %+v", st)
	}
	// A new Syncer through the other backend rebuilds the table once, for the endpoint maps'
	// key type (see netlink_image.go), and one through the same backend adopts it.
	other := map[string]string{"nft": "netlink", "netlink": "nft"}[backend]
	for _, step := range []struct {
		kind    string
		rebuild bool
	}{{backend, false}, {other, true}, {other, false}, {backend, true}, {backend, false}} {
		s, _ = openBackend(t, ns, step.kind, family, opts)
		st := sync(s, false)
		if !st.Full || (st.Operations != 0) != step.rebuild || (st.Rebuilt != "") != step.rebuild ||
			(step.rebuild && !strings.Contains(st.Rebuilt, "cluster-endpoints")) {
			t.Fatalf("first sync of a new %s Syncer on the table: %+v, want a rebuild: %v", step.kind, st, step.rebuild)
		}
	}
	services[1].Ports[0].Endpoints = services[1].Ports[0].Endpoints[:1]
	var err error
	var res DriftCheck
	ns.do(func() {
		if _, err = s.SyncChanges(ctx, services[1:2], nil); err == nil {
			res, err = s.CheckDrift(ctx)
		}
	})
	if err != nil || res.Drift != nil || res.Listed {
		t.Fatalf("after a change through the adopting Syncer: %+v %v", res, err)
	}
	if list() == before {
		t.Fatal("the change did not reach the table")
	}
}

// TestKernelFullSyncRepairsWhatChanged: a periodic full sync, without a drift check before it,
// repairs a rule rewritten in place with a few operations, and rebuilds a table whose set
// changed type, which no difference repairs.
func TestKernelFullSyncRepairsWhatChanged(t *testing.T) {
	for _, backend := range kernelBackends {
		t.Run(backend, func(t *testing.T) {
			l := newDriftLab(t, backend)
			want := l.want
			listing := l.nftCmd("-a", "list", "chain", "ip", TableName, chainReject)
			m := handleRE.FindAllStringSubmatch(listing, -1)
			if len(m) == 0 {
				t.Fatalf("no rule handle in:\n%s", listing)
			}
			l.nftCmd("replace", "rule", "ip", TableName, chainReject, "handle", m[len(m)-1][1], "accept")
			if st := l.sync(true); st.Rebuilt != "" || st.Operations == 0 || st.Operations > 3 || l.want != want {
				t.Fatalf("rule rewritten in place: %+v\n%s", st, lineDiff(want, l.want))
			}
			l.nftCmd("flush", "chain", "ip", TableName, chainMasquerading)
			l.nftCmd("delete", "set", "ip", TableName, setHairpin)
			l.nftCmd("add", "set", "ip", TableName, setHairpin, "{ type ipv4_addr ; }")
			st := l.sync(true)
			if !strings.Contains(st.Rebuilt, setHairpin) || l.want != want {
				t.Fatalf("set type changed: %+v\n%s", st, lineDiff(want, l.want))
			}
			if st := l.sync(true); st.Operations != 0 {
				t.Fatalf("after the repairs: %+v", st)
			}
		})
	}
}
