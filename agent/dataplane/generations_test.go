package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// TestKernelBothFamiliesShareWhatTheyKnowOfTheGeneration programs both IP families' tables in
// one namespace, as the agent does on a dual-stack node. With one Generations between them, each
// family's write leaves the other's table known, so neither check reads its table; with one
// each (how it was before), the family written first reads its table after the other's write.
// A hand edit of one table between the two writes is found either way.
func TestKernelBothFamiliesShareWhatTheyKnowOfTheGeneration(t *testing.T) {
	for _, backend := range kernelBackends {
		for _, shared := range []bool{true, false} {
			name := backend + "/own"
			if shared {
				name = backend + "/shared"
			}
			t.Run(name, func(t *testing.T) {
				requireKernel(t)
				ns := enterNetns(t, newNetns(t, uniquePrefix(t), "gens"))
				var gens *Generations
				if shared {
					gens = NewGenerations()
				}
				v4, _ := openBackend(t, ns, backend, knftables.IPv4Family,
					Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, Generations: gens})
				v6, _ := openBackend(t, ns, backend, knftables.IPv6Family,
					Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:244::/48")}, Generations: gens})
				four := goldenServices()
				six := []Service{{Namespace: "six", Name: "web", ClusterIPs: ips("fd00:96::20"), Ports: []Port{
					{Name: "http", Protocol: TCP, Port: 80, Endpoints: eps("[fd00:244::7]:8080", "[fd00:244::8]:8080")}}}}
				ctx := context.Background()
				sync := func(full bool) {
					t.Helper()
					var err error
					ns.do(func() {
						if _, err = v4.Sync(ctx, four, full); err == nil {
							_, err = v6.Sync(ctx, six, full)
						}
					})
					if err != nil {
						t.Fatal(err)
					}
				}
				check := func(s *Syncer) DriftCheck {
					t.Helper()
					var res DriftCheck
					var err error
					ns.do(func() { res, err = s.CheckDrift(ctx) })
					if err != nil {
						t.Fatal(err)
					}
					return res
				}

				sync(true)
				four[1].Ports[0].Endpoints = eps("10.244.2.7:8080")
				six[0].Ports[0].Endpoints = eps("[fd00:244::9]:8080")
				sync(false)
				r4, r6 := check(v4), check(v6)
				if r4.Drift != nil || r6.Drift != nil {
					t.Fatalf("only the agent wrote, yet drift: %+v %+v", r4, r6)
				}
				if shared && (r4.Listed || r6.Listed) {
					t.Fatalf("with a shared Generations: ip listed %v, ip6 listed %v; want neither", r4.Listed, r6.Listed)
				}
				if !shared && !r4.Listed {
					t.Fatalf("with one Generations each the ip check should have read its table after the ip6 write")
				}

				// A hand edit of the ip table between the two families' writes.
				four[1].Ports[0].Endpoints = eps("10.244.2.8:8080")
				six[0].Ports[0].Endpoints = eps("[fd00:244::10]:8080")
				var err error
				ns.do(func() {
					if _, err = v4.Sync(ctx, four, false); err == nil {
						run(t, "nft", "add", "chain", "ip", TableName, "intruder")
						_, err = v6.Sync(ctx, six, false)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if r := check(v4); r.Drift == nil || !strings.Contains(r.Drift.Detail, "intruder") {
					t.Fatalf("the ip table's intruder went unnoticed: %+v", r)
				}
				if r := check(v6); r.Drift != nil {
					t.Fatalf("the ip6 table was not touched, yet drift: %+v %v", r, r.Drift)
				}
			})
		}
	}
}
