package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// kernelBackends are the ways a Syncer can reach the kernel; kernel tests run on each.
var kernelBackends = []string{"nft", "netlink"}

// openBackend opens a Syncer for family in the namespace ns runs in, through the nft program
// ("nft") or netlink ("netlink"), and a knftables.Interface to list the table with.
func openBackend(t testing.TB, ns *nsThread, kind string, family knftables.Family, opts Options) (*Syncer, knftables.Interface) {
	t.Helper()
	var s *Syncer
	var nft knftables.Interface
	var err error
	opts.Family = family
	ns.do(func() {
		if nft, err = Open(family); err != nil {
			return
		}
		if kind == "nft" {
			s, err = New(nft, opts)
			return
		}
		var b Backend
		if b, err = NewNetlinkBackend(family); err == nil {
			s, err = NewWithBackend(b, opts)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, nft
}

// TestKernelNetlinkProgramsWhatNftDoes programs the same Services through both backends, in
// two namespaces, fully and then incrementally, and compares the tables as nft lists them.
func TestKernelNetlinkProgramsWhatNftDoes(t *testing.T) {
	requireKernel(t)
	prefix := uniquePrefix(t)
	viaNft, viaNetlink := enterNetns(t, newNetns(t, prefix, "nft")), enterNetns(t, newNetns(t, prefix, "nl"))
	opts := Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("192.168.0.0/24")}}
	a, aNFT := openBackend(t, viaNft, "nft", knftables.IPv4Family, opts)
	b, bNFT := openBackend(t, viaNetlink, "netlink", knftables.IPv4Family, opts)
	ctx := context.Background()
	step := func(name string, services []Service, full bool) {
		t.Helper()
		var err error
		viaNft.do(func() { _, err = a.Sync(ctx, services, full) })
		if err != nil {
			t.Fatalf("%s via nft: %v", name, err)
		}
		viaNetlink.do(func() { _, err = b.Sync(ctx, services, full) })
		if err != nil {
			t.Fatalf("%s via netlink: %v", name, err)
		}
		var want, got string
		viaNft.do(func() { want, err = describeTable(ctx, aNFT) })
		if err == nil {
			viaNetlink.do(func() { got, err = describeTable(ctx, bNFT) })
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d lines", name, strings.Count(got, "\n"))
		if got != want {
			t.Fatalf("%s: netlink table differs from nft's:\n%s", name, lineDiff(want, got))
		}
	}
	services := goldenServices()
	step("full", services, true)
	changed := append([]Service(nil), services...)
	changed[1].Ports = append([]Port(nil), changed[1].Ports...)
	changed[1].Ports[0].Endpoints = eps("10.244.2.7:8080", "10.244.1.6:8080", "10.244.3.3:8080")
	changed[2].AffinityTimeout = 0
	changed = changed[:len(changed)-1]
	step("incremental", changed, false)
	time.Sleep(1100 * time.Millisecond) // stale chains go
	step("back", services, false)
	step("full again", services, true)
}

// TestEveryRenderedRuleCompiles compiles each rule the renderer writes, in both families,
// and checks that the compiler refuses what it does not know instead of guessing.
func TestEveryRenderedRuleCompiles(t *testing.T) {
	v6 := []Service{{Namespace: "six", Name: "web", ClusterIPs: ips("fd00:96::20"), AffinityTimeout: time.Minute, Ports: []Port{
		{Name: "http", Protocol: TCP, Port: 80, NodePort: 30080, ExternalLocal: true,
			Endpoints: eps("[fd00:244::7]:8080", "[fd00:244::8]:8080"), ExternalEndpoints: eps("[fd00:244::7]:8080", "[fd00:244::8]:8080")},
		{Name: "dns", Protocol: UDP, Port: 53, Endpoints: eps("[fd00:244::7]:53", "[fd00:244::9]:53")},
		{Name: "one", Protocol: SCTP, Port: 9, Endpoints: eps("[fd00:244::7]:9")},
	}}}
	v6 = append(v6, Service{Namespace: "six", Name: "plain", ClusterIPs: ips("fd00:96::21"), Ports: []Port{
		{Name: "a", Protocol: TCP, Port: 80, Endpoints: eps("[fd00:244::7]:80", "[fd00:244::8]:80")},
		{Name: "b", Protocol: TCP, Port: 81, Endpoints: eps("[fd00:244::7]:81")}}})
	for _, tc := range []struct {
		family   knftables.Family
		services []Service
		cidr     string
	}{{knftables.IPv4Family, goldenServices(), "10.244.0.0/16"}, {knftables.IPv6Family, v6, "fd00:244::/48"}} {
		fam, _ := familyFor(tc.family)
		dump, _, err := Render(context.Background(), tc.services, Options{Family: tc.family, PodCIDRs: []netip.Prefix{netip.MustParsePrefix(tc.cidr)}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(dump, "\n") {
			rest, ok := strings.CutPrefix(line, "add rule "+fam.selector+" "+TableName+" ")
			if !ok {
				continue
			}
			_, rule, _ := strings.Cut(rest, " ")
			if _, err := compileRule(rule, fam, func(string) uint32 { return 0 }); err != nil {
				t.Errorf("%s: %v", tc.family, err)
			}
			n++
		}
		if n < 20 {
			t.Errorf("%s: only %d rules compiled", tc.family, n)
		}
	}
	for _, bad := range []string{"", "counter", "ip daddr . th dport 10.0.0.1", "ip daddr 10.0.0.1/33", "dnat ip to 10.0.0.1", "dnat ip to [fd00::1]:80",
		"meta mark set meta mark and 1", "numgen random mod 0 vmap @x", "update @x { ip saddr", "jump"} {
		if _, err := compileRule(bad, ipv4, func(string) uint32 { return 0 }); err == nil && bad != "" {
			t.Errorf("compiled %q", bad)
		}
	}
}

func TestElementEncodingRefusesBadInput(t *testing.T) {
	d, err := parseSetSpec("ipv4_addr . inet_proto . inet_service : verdict", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, el := range []struct{ key, value []string }{
		{[]string{"10.0.0.1", "tcp"}, []string{"drop"}},
		{[]string{"fd00::1", "tcp", "80"}, []string{"drop"}},
		{[]string{"10.0.0.1", "icmp", "80"}, []string{"drop"}},
		{[]string{"10.0.0.1", "tcp", "99999"}, []string{"drop"}},
		{[]string{"10.0.0.1", "tcp", "80"}, []string{"return to sender"}},
	} {
		if _, err := d.encode(el.key, el.value, false); err == nil {
			t.Errorf("encoded %v : %v", el.key, el.value)
		}
	}
	good, err := d.encode([]string{"10.0.0.1", "tcp", "80"}, []string{"goto svc-x"}, false)
	if err != nil || len(good) != 1 || len(good[0].Key) != 12 || good[0].VerdictData == nil || good[0].VerdictData.Chain != "svc-x" {
		t.Errorf("encode = %+v, %v", good, err)
	}
	for _, spec := range []string{"ether_addr", "numgen random mod 2 : verdict", "ipv4_addr : counter"} {
		if _, err := parseSetSpec(spec, strings.HasPrefix(spec, "numgen")); err == nil {
			t.Errorf("accepted set type %q", spec)
		}
	}
	if end, ok := prefixEnd(netip.MustParsePrefix("10.244.0.0/16")); !ok || end != netip.MustParseAddr("10.245.0.0") {
		t.Errorf("prefixEnd = %v %v", end, ok)
	}
	if _, ok := prefixEnd(netip.MustParsePrefix("255.0.0.0/8")); ok {
		t.Error("prefixEnd past the end of the space")
	}
}

func TestKernelNetlinkDeletesTheTable(t *testing.T) {
	requireKernel(t)
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "del"))
	s, nft := openBackend(t, ns, "netlink", knftables.IPv4Family, Options{})
	var err error
	var chains []string
	ns.do(func() {
		if err = ProbeNetlink(knftables.IPv4Family); err != nil {
			return
		}
		if _, err = s.Sync(context.Background(), goldenServices(), true); err != nil {
			return
		}
		if err = DeleteTableNetlink(context.Background(), knftables.IPv4Family); err != nil {
			return
		}
		if err = DeleteTableNetlink(context.Background(), knftables.IPv4Family); err != nil { // none left: no error
			return
		}
		chains, err = nft.List(context.Background(), "chains")
	})
	if !knftables.IsNotFound(err) || len(chains) != 0 {
		t.Fatalf("after deleting: chains %v, %v", chains, err)
	}
}
