package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// goldenServices covers every rendering branch: one endpoint, several
// endpoints, several ports and protocols, a second (ServiceImport) IP, a
// NodePort, ClientIP affinity with a local endpoint (hairpin), no endpoints
// at all, and externalTrafficPolicy Local with and without local endpoints.
func goldenServices() []Service {
	return []Service{
		tcpService("shop", "cart", "10.96.0.10", 80, "10.244.1.5:8080"),
		{
			Namespace: "shop", Name: "web", ClusterIPs: ips("10.96.0.20", "242.1.0.20"),
			Ports: []Port{
				{Name: "http", Protocol: TCP, Port: 80, NodePort: 30080, Endpoints: eps("10.244.2.7:8080", "10.244.1.6:8080")},
				{Name: "dns", Protocol: UDP, Port: 53, Endpoints: eps("10.244.1.6:5353")},
			},
		},
		{
			Namespace: "shop", Name: "session", ClusterIPs: ips("10.96.0.30"), AffinityTimeout: 10 * time.Minute,
			Ports: []Port{{Name: "", Protocol: TCP, Port: 443, Endpoints: []Endpoint{
				{Addr: netip.MustParseAddrPort("10.244.1.8:8443"), Local: true},
				{Addr: netip.MustParseAddrPort("10.244.2.8:8443")},
			}}},
		},
		{
			Namespace: "shop", Name: "gone", ClusterIPs: ips("10.96.0.40"),
			Ports: []Port{{Name: "http", Protocol: TCP, Port: 80, NodePort: 30040}},
		},
		{
			Namespace: "shop", Name: "edge", ClusterIPs: ips("10.96.0.50"),
			Ports: []Port{
				{Name: "http", Protocol: TCP, Port: 80, NodePort: 30050, ExternalLocal: true,
					Endpoints: eps("10.244.1.9:80", "10.244.2.9:80"), ExternalEndpoints: eps("10.244.1.9:80")},
				{Name: "alt", Protocol: TCP, Port: 81, NodePort: 30051, ExternalLocal: true,
					Endpoints: eps("10.244.2.9:81")},
			},
		},
	}
}

const goldenDump = `add table ip fleetslice { comment "fleetslice node agent: Service load balancing" ; }
add chain ip fleetslice affinity-record
add chain ip fleetslice cluster-dispatch
add chain ip fleetslice cluster-masquerade
add chain ip fleetslice endpoint-checks
add chain ip fleetslice filter-forward { type filter hook forward priority 0 ; }
add chain ip fleetslice filter-input { type filter hook input priority 0 ; }
add chain ip fleetslice filter-output { type filter hook output priority 0 ; }
add chain ip fleetslice mark-for-masquerade
add chain ip fleetslice masquerading
add chain ip fleetslice nat-output { type nat hook output priority -100 ; }
add chain ip fleetslice nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip fleetslice nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip fleetslice nodeport-checks
add chain ip fleetslice pick-cluster-tcp-1
add chain ip fleetslice pick-cluster-tcp-2
add chain ip fleetslice pick-cluster-udp-1
add chain ip fleetslice pick-local-tcp-1
add chain ip fleetslice pick-nodeport-tcp-2
add chain ip fleetslice rec-4G5NKZJYEN5H-aff-KBDBP5IBC5QW-shop/session/tcp/_/600
add chain ip fleetslice reject-service
add chain ip fleetslice services
add chain ip fleetslice svc-BDBNSD6SSVGP-shop/session/tcp/_
add set ip fleetslice cluster-ports { type ipv4_addr . inet_proto . inet_service ; }
add set ip fleetslice hairpin-endpoints { type ipv4_addr . ipv4_addr . inet_proto . inet_service ; }
add set ip fleetslice no-endpoint-nodeports { type inet_proto . inet_service ; }
add set ip fleetslice no-endpoint-services { type ipv4_addr . inet_proto . inet_service ; }
add set ip fleetslice no-local-endpoint-nodeports { type inet_proto . inet_service ; }
add set ip fleetslice pick-cluster-tcp-1 { type ipv4_addr . inet_proto . inet_service ; }
add set ip fleetslice pick-cluster-tcp-2 { type ipv4_addr . inet_proto . inet_service ; }
add set ip fleetslice pick-cluster-udp-1 { type ipv4_addr . inet_proto . inet_service ; }
add set ip fleetslice pod-cidrs { type ipv4_addr ; flags interval ; }
add map ip fleetslice aff-KBDBP5IBC5QW-shop/session/tcp/_/600 { type ipv4_addr : ipv4_addr ; flags dynamic,timeout ; timeout 600s ; size 1048576 ; }
add map ip fleetslice affinity-endpoints { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip fleetslice affp-KBDBP5IBC5QW-shop/session/tcp/_/600 { type ipv4_addr : inet_service ; flags dynamic,timeout ; timeout 600s ; size 1048576 ; }
add map ip fleetslice cluster-endpoints-sctp { typeof ip daddr . sctp dport . numgen random mod 1 : ip daddr . sctp dport ; }
add map ip fleetslice cluster-endpoints-tcp { typeof ip daddr . tcp dport . numgen random mod 1 : ip daddr . tcp dport ; }
add map ip fleetslice cluster-endpoints-udp { typeof ip daddr . udp dport . numgen random mod 1 : ip daddr . udp dport ; }
add map ip fleetslice nodeport-endpoints-sctp { typeof sctp dport . numgen random mod 1 : ip daddr . sctp dport ; }
add map ip fleetslice nodeport-endpoints-tcp { typeof tcp dport . numgen random mod 1 : ip daddr . tcp dport ; }
add map ip fleetslice nodeport-endpoints-udp { typeof udp dport . numgen random mod 1 : ip daddr . udp dport ; }
add map ip fleetslice service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip fleetslice service-nodeports { type inet_proto . inet_service : verdict ; }
add rule ip fleetslice affinity-record ip daddr . meta l4proto . th dport vmap @affinity-endpoints
add rule ip fleetslice cluster-dispatch jump cluster-masquerade
add rule ip fleetslice cluster-dispatch ip daddr . meta l4proto . th dport @pick-cluster-tcp-1 goto pick-cluster-tcp-1
add rule ip fleetslice cluster-dispatch ip daddr . meta l4proto . th dport @pick-cluster-tcp-2 goto pick-cluster-tcp-2
add rule ip fleetslice cluster-dispatch ip daddr . meta l4proto . th dport @pick-cluster-udp-1 goto pick-cluster-udp-1
add rule ip fleetslice cluster-masquerade ip saddr != @pod-cidrs jump mark-for-masquerade
add rule ip fleetslice endpoint-checks ip daddr . meta l4proto . th dport @no-endpoint-services goto reject-service
add rule ip fleetslice filter-forward ct state new jump endpoint-checks
add rule ip fleetslice filter-input ct state new jump endpoint-checks
add rule ip fleetslice filter-input ct state new jump nodeport-checks
add rule ip fleetslice filter-output ct state new jump endpoint-checks
add rule ip fleetslice mark-for-masquerade meta mark set meta mark or 0x4000
add rule ip fleetslice masquerading meta mark and 0x4000 != 0 meta mark set meta mark xor 0x4000 masquerade fully-random
add rule ip fleetslice masquerading ip saddr . ip daddr . meta l4proto . th dport @hairpin-endpoints masquerade fully-random
add rule ip fleetslice nat-output jump services
add rule ip fleetslice nat-postrouting ct status dnat jump affinity-record
add rule ip fleetslice nat-postrouting jump masquerading
add rule ip fleetslice nat-prerouting jump services
add rule ip fleetslice nodeport-checks fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport @no-local-endpoint-nodeports drop
add rule ip fleetslice nodeport-checks fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport @no-endpoint-nodeports goto reject-service
add rule ip fleetslice pick-cluster-tcp-1 meta l4proto tcp dnat ip addr . port to ip daddr . tcp dport . numgen random mod 1 map @cluster-endpoints-tcp
add rule ip fleetslice pick-cluster-tcp-2 meta l4proto tcp dnat ip addr . port to ip daddr . tcp dport . numgen random mod 2 map @cluster-endpoints-tcp
add rule ip fleetslice pick-cluster-udp-1 meta l4proto udp dnat ip addr . port to ip daddr . udp dport . numgen random mod 1 map @cluster-endpoints-udp
add rule ip fleetslice pick-local-tcp-1 meta l4proto tcp dnat ip addr . port to tcp dport . numgen random mod 1 map @nodeport-endpoints-tcp
add rule ip fleetslice pick-nodeport-tcp-2 jump mark-for-masquerade
add rule ip fleetslice pick-nodeport-tcp-2 meta l4proto tcp dnat ip addr . port to tcp dport . numgen random mod 2 map @nodeport-endpoints-tcp
add rule ip fleetslice rec-4G5NKZJYEN5H-aff-KBDBP5IBC5QW-shop/session/tcp/_/600 meta l4proto tcp update @aff-KBDBP5IBC5QW-shop/session/tcp/_/600 { ip saddr : ip daddr } update @affp-KBDBP5IBC5QW-shop/session/tcp/_/600 { ip saddr : tcp dport }
add rule ip fleetslice reject-service meta l4proto tcp reject with tcp reset
add rule ip fleetslice reject-service reject
add rule ip fleetslice services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip fleetslice services ip daddr . meta l4proto . th dport @cluster-ports goto cluster-dispatch
add rule ip fleetslice services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
add rule ip fleetslice svc-BDBNSD6SSVGP-shop/session/tcp/_ jump cluster-masquerade
add rule ip fleetslice svc-BDBNSD6SSVGP-shop/session/tcp/_ meta l4proto tcp dnat ip to ip saddr map @aff-KBDBP5IBC5QW-shop/session/tcp/_/600 : ip saddr map @affp-KBDBP5IBC5QW-shop/session/tcp/_/600
add rule ip fleetslice svc-BDBNSD6SSVGP-shop/session/tcp/_ goto pick-cluster-tcp-2
add element ip fleetslice cluster-ports { 10.96.0.10 . tcp . 80 comment "shop/cart:http" }
add element ip fleetslice cluster-ports { 10.96.0.50 . tcp . 81 comment "shop/edge:alt" }
add element ip fleetslice cluster-ports { 10.96.0.50 . tcp . 80 comment "shop/edge:http" }
add element ip fleetslice cluster-ports { 10.96.0.20 . udp . 53 comment "shop/web:dns" }
add element ip fleetslice cluster-ports { 242.1.0.20 . udp . 53 comment "shop/web:dns" }
add element ip fleetslice cluster-ports { 10.96.0.20 . tcp . 80 comment "shop/web:http" }
add element ip fleetslice cluster-ports { 242.1.0.20 . tcp . 80 comment "shop/web:http" }
add element ip fleetslice hairpin-endpoints { 10.244.1.8 . 10.244.1.8 . tcp . 8443 }
add element ip fleetslice no-endpoint-nodeports { tcp . 30040 comment "shop/gone:http" }
add element ip fleetslice no-endpoint-services { 10.96.0.40 . tcp . 80 comment "shop/gone:http" }
add element ip fleetslice no-local-endpoint-nodeports { tcp . 30051 comment "shop/edge:alt" }
add element ip fleetslice pick-cluster-tcp-1 { 10.96.0.10 . tcp . 80 }
add element ip fleetslice pick-cluster-tcp-1 { 10.96.0.50 . tcp . 81 }
add element ip fleetslice pick-cluster-tcp-2 { 10.96.0.50 . tcp . 80 }
add element ip fleetslice pick-cluster-tcp-2 { 10.96.0.20 . tcp . 80 }
add element ip fleetslice pick-cluster-tcp-2 { 242.1.0.20 . tcp . 80 }
add element ip fleetslice pick-cluster-udp-1 { 10.96.0.20 . udp . 53 }
add element ip fleetslice pick-cluster-udp-1 { 242.1.0.20 . udp . 53 }
add element ip fleetslice pod-cidrs { 10.244.0.0/16 }
add element ip fleetslice affinity-endpoints { 10.244.1.8 . tcp . 8443 : goto rec-4G5NKZJYEN5H-aff-KBDBP5IBC5QW-shop/session/tcp/_/600 }
add element ip fleetslice affinity-endpoints { 10.244.2.8 . tcp . 8443 : goto rec-4G5NKZJYEN5H-aff-KBDBP5IBC5QW-shop/session/tcp/_/600 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.10 . 80 . 0 : 10.244.1.5 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.50 . 81 . 0 : 10.244.2.9 . 81 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.50 . 80 . 0 : 10.244.1.9 . 80 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.50 . 80 . 1 : 10.244.2.9 . 80 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.30 . 443 . 0 : 10.244.1.8 . 8443 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.30 . 443 . 1 : 10.244.2.8 . 8443 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.20 . 80 . 0 : 10.244.1.6 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 10.96.0.20 . 80 . 1 : 10.244.2.7 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 242.1.0.20 . 80 . 0 : 10.244.1.6 . 8080 }
add element ip fleetslice cluster-endpoints-tcp { 242.1.0.20 . 80 . 1 : 10.244.2.7 . 8080 }
add element ip fleetslice cluster-endpoints-udp { 10.96.0.20 . 53 . 0 : 10.244.1.6 . 5353 }
add element ip fleetslice cluster-endpoints-udp { 242.1.0.20 . 53 . 0 : 10.244.1.6 . 5353 }
add element ip fleetslice nodeport-endpoints-tcp { 30050 . 0 : 10.244.1.9 . 80 }
add element ip fleetslice nodeport-endpoints-tcp { 30080 . 0 : 10.244.1.6 . 8080 }
add element ip fleetslice nodeport-endpoints-tcp { 30080 . 1 : 10.244.2.7 . 8080 }
add element ip fleetslice service-ips { 10.96.0.30 . tcp . 443 comment "shop/session:_" : goto svc-BDBNSD6SSVGP-shop/session/tcp/_ }
add element ip fleetslice service-nodeports { tcp . 30050 comment "shop/edge:http" : goto pick-local-tcp-1 }
add element ip fleetslice service-nodeports { tcp . 30080 comment "shop/web:http" : goto pick-nodeport-tcp-2 }
`

func TestFullSyncWritesExactRules(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
	st := mustSync(t, s, goldenServices(), true)
	if got := fake.Dump(); got != goldenDump {
		t.Errorf("ruleset differs from the golden one:\n%s", lineDiff(goldenDump, got))
	}
	if !st.Full || st.Services != 5 || st.Changed != 5 || st.Removed != 0 || len(st.Rejected) != 0 {
		t.Errorf("stats = %+v", st)
	}
	if st.Operations != fake.LastTransaction.NumOperations() {
		t.Errorf("stats count %d operations, transaction has %d", st.Operations, fake.LastTransaction.NumOperations())
	}
}

// lineDiff lists lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var b strings.Builder
	for l, n := range count {
		for ; n > 0; n-- {
			b.WriteString("- " + l + "\n")
		}
		for ; n < 0; n++ {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

func TestMasqueradeAllWithoutPodCIDRs(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{MasqueradeMark: 0x100000})
	mustSync(t, s, nil, true)
	dump := fake.Dump()
	for _, want := range []string{
		"add rule ip fleetslice cluster-masquerade jump mark-for-masquerade\n",
		"add rule ip fleetslice mark-for-masquerade meta mark set meta mark or 0x100000\n",
		"add rule ip fleetslice masquerading meta mark and 0x100000 != 0 meta mark set meta mark xor 0x100000 masquerade fully-random\n",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("missing %q in\n%s", want, dump)
		}
	}
	if strings.Contains(dump, setPodCIDRs) {
		t.Errorf("pod-cidrs set written without pod CIDRs")
	}
}

func TestIPv6TableUsesOnlyIPv6(t *testing.T) {
	opts := Options{Family: knftables.IPv6Family, PodCIDRs: []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/56"),
	}}
	s, fake, _ := newFakeSyncer(t, opts)
	services := []Service{
		{Namespace: "a", Name: "dual", ClusterIPs: ips("10.96.0.1", "fd00:96::1"), Ports: []Port{{
			Name: "http", Protocol: TCP, Port: 80, NodePort: 30001,
			Endpoints: eps("10.244.0.5:80", "[fd00:244::5]:80", "[fd00:244::6]:80"),
		}}},
		tcpService("a", "v4only", "10.96.0.2", 80, "10.244.0.7:80"),
	}
	st := mustSync(t, s, services, true)
	if st.Services != 1 {
		t.Errorf("services = %d, want only the dual-stack one", st.Services)
	}
	dump := fake.Dump()
	for _, want := range []string{
		"add table ip6 fleetslice",
		"add map ip6 fleetslice service-ips { type ipv6_addr . inet_proto . inet_service : verdict ; }",
		"add rule ip6 fleetslice cluster-masquerade ip6 saddr != @pod-cidrs jump mark-for-masquerade",
		"add element ip6 fleetslice pod-cidrs { fd00:244::/56 }",
		"add rule ip6 fleetslice services fib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports",
		"add rule ip6 fleetslice pick-cluster-tcp-2 meta l4proto tcp dnat ip6 addr . port to ip6 daddr . tcp dport . numgen random mod 2 map @cluster-endpoints-tcp",
		"add map ip6 fleetslice cluster-endpoints-tcp { typeof ip6 daddr . tcp dport . numgen random mod 1 : ip6 daddr . tcp dport ; }",
		"add element ip6 fleetslice cluster-endpoints-tcp { fd00:96::1 . 80 . 0 : fd00:244::5 . 80 }",
		"add element ip6 fleetslice cluster-endpoints-tcp { fd00:96::1 . 80 . 1 : fd00:244::6 . 80 }",
		`add element ip6 fleetslice cluster-ports { fd00:96::1 . tcp . 80 comment "a/dual:http" }`,
		"add element ip6 fleetslice pick-cluster-tcp-2 { fd00:96::1 . tcp . 80 }",
		"add rule ip6 fleetslice cluster-dispatch ip6 daddr . meta l4proto . th dport @pick-cluster-tcp-2 goto pick-cluster-tcp-2",
		`add element ip6 fleetslice service-nodeports { tcp . 30001 comment "a/dual:http" : goto pick-nodeport-tcp-2 }`,
		"add element ip6 fleetslice nodeport-endpoints-tcp { 30001 . 1 : fd00:244::6 . 80 }",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, unwanted := range []string{"10.96.0.1", "10.244.0.5", "10.244.0.0/16", "v4only"} {
		if strings.Contains(dump, unwanted) {
			t.Errorf("IPv6 table mentions %q", unwanted)
		}
	}
}

func TestSingleEndpointIPv6AndAffinity(t *testing.T) {
	svc := Service{Namespace: "a", Name: "one", ClusterIPs: ips("fd00:96::9"), AffinityTimeout: time.Second,
		Ports: []Port{{Name: "p", Protocol: SCTP, Port: 9, Endpoints: eps("[fd00:244::9]:99")}}}
	out, _, err := Render(context.Background(), []Service{svc}, Options{Family: knftables.IPv6Family})
	if err != nil {
		t.Fatal(err)
	}
	p := svc.Ports[0]
	addrs, ports := affinityMapName(&svc, p, false), affinityPortMapName(&svc, p, false)
	record := recordChainName([]string{addrs})
	for _, want := range []string{
		"add rule ip6 fleetslice " + serviceChainName(&svc, p) + " jump cluster-masquerade",
		"add rule ip6 fleetslice " + serviceChainName(&svc, p) + " meta l4proto sctp dnat ip6 to ip6 saddr map @" + addrs + " : ip6 saddr map @" + ports,
		"add rule ip6 fleetslice " + serviceChainName(&svc, p) + " goto pick-cluster-sctp-1",
		"add rule ip6 fleetslice " + record + " meta l4proto sctp update @" + addrs + " { ip6 saddr : ip6 daddr } update @" + ports + " { ip6 saddr : sctp dport }",
		"add map ip6 fleetslice " + addrs + " { type ipv6_addr : ipv6_addr ; flags dynamic,timeout ; timeout 1s ; size 1048576 ; }",
		"add map ip6 fleetslice " + ports + " { type ipv6_addr : inet_service ; flags dynamic,timeout ; timeout 1s ; size 1048576 ; }",
		"add element ip6 fleetslice affinity-endpoints { fd00:244::9 . sctp . 99 : goto " + record + " }",
		"add element ip6 fleetslice cluster-endpoints-sctp { fd00:96::9 . 9 . 0 : fd00:244::9 . 99 }",
		"add rule ip6 fleetslice nat-postrouting ct status dnat jump affinity-record",
		"add rule ip6 fleetslice affinity-record ip6 daddr . meta l4proto . th dport vmap @affinity-endpoints",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestObjectNamesStableAndBounded(t *testing.T) {
	// Pinned: names must not change between agent versions, or an upgrade
	// would rewrite every chain.
	if got := objectName("svc", "shop", "cart", "tcp", "http"); got != "svc-NFKXLE2MLKYW-shop/cart/tcp/http" {
		t.Errorf("name changed: %s", got)
	}
	long := strings.Repeat("n", 63)
	a := objectName("ep", long, long+"a", "tcp", long, "[fd00:1:2:3:4:5:6:7]:65535")
	b := objectName("ep", long, long+"b", "tcp", long, "[fd00:1:2:3:4:5:6:7]:65535")
	if a == b {
		t.Errorf("distinct identities share the name %s", a)
	}
	for _, n := range []string{a, b} {
		if len(n) > maxObjectNameLength || len(n) > knftables.NameLengthMax {
			t.Errorf("name %q is %d long", n, len(n))
		}
	}
	if got := sanitize("we!rd name;{x}"); got != "we_rd_name__x_" {
		t.Errorf("sanitize = %q", got)
	}
}

// A Service's map elements are allocated once: entriesAtMost bounds what renderService writes,
// for every rendering branch and for weighted endpoints, so the slice never regrows.
func TestRenderedEntriesFitTheirBound(t *testing.T) {
	weighted := tcpService("shop", "weighted", "10.96.0.60", 80, "10.244.1.1:80", "10.244.2.1:80")
	weighted.Ports[0].Endpoints[0].Weight = 3
	weighted.Ports[0].NodePort = 30060
	world, _ := initialWorld(40)
	for _, svc := range append(append(goldenServices(), weighted), world...) {
		norm, ok, err := normalize(svc, ipv4)
		if err != nil || !ok {
			t.Fatalf("%s: normalize: ok=%v err=%v", svc.Key(), ok, err)
		}
		objs := renderService(&norm, ipv4)
		if bound := entriesAtMost(&norm); cap(objs.entries) != bound || len(objs.entries) == 0 {
			t.Errorf("%s: %d elements in a slice of capacity %d, bound %d", svc.Key(), len(objs.entries), cap(objs.entries), bound)
		}
	}
}
