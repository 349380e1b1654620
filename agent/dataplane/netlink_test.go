package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/netlinkenc"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// kernelBackends are the ways a Syncer can reach the kernel; kernel tests run on each.
var kernelBackends = []string{"nft", "netlink"}

// openBackend opens a Syncer for family in the namespace ns runs in, through the nft program
// ("nft", as the agent's --nftables-backend=nft does: NewKernelNft) or netlink ("netlink"), and
// a knftables.Interface to list the table with.
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
			s, err = NewKernelNft(nft, opts)
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

// TestEveryRenderedRuleCompiles compiles each rule the planner writes, in both families, and
// checks that the compiler refuses what it does not know instead of guessing.
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
		back := &recordingBackend{}
		s, err := NewWithBackend(back, Options{Family: tc.family, PodCIDRs: []netip.Prefix{netip.MustParsePrefix(tc.cidr)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sync(context.Background(), tc.services, true); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range back.ops {
			if r, ok := o.Obj.(*ruleset.Rule); ok {
				if _, err := netlinkenc.Exprs(fam.rs, r.Stmts, func(string) uint32 { return 0 }); err != nil {
					t.Errorf("%s: chain %s: %v", tc.family, r.Chain, err)
				}
				n++
			}
		}
		if n < 20 {
			t.Errorf("%s: only %d rules compiled", tc.family, n)
		}
	}
	for _, bad := range [][]ruleset.Stmt{
		{&ruleset.Verdict{}},
		{&ruleset.Compare{Field: ruleset.Field{Kind: ruleset.Numgen}, Value: ruleset.Proto(ruleset.TCP)}},
		{&ruleset.Compare{Field: ruleset.Field{Kind: ruleset.DAddr}, Value: ruleset.Proto(ruleset.TCP)}},
		{&ruleset.Compare{Field: ruleset.Field{Kind: ruleset.DAddr}, Value: ruleset.Addr(netip.MustParseAddr("fd00::1"))}},
	} {
		if _, err := netlinkenc.Exprs(ruleset.IPv4, bad, func(string) uint32 { return 0 }); err == nil {
			t.Errorf("compiled %#v", bad[0])
		}
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
