package dataplane

import (
	"slices"
	"testing"
	"time"
)

// TestSharedEndpointsRecordInEveryPortsMaps checks the record chains of affinity.go across
// Services: an endpoint of two affinity Services leads to one chain that records in both
// Services' maps; each step, taken incrementally, leaves the table a fresh render would write,
// and a chain nobody leads to is retired.
func TestSharedEndpointsRecordInEveryPortsMaps(t *testing.T) {
	s, fake, clock := newFakeSyncer(t, Options{StaleChainDelay: time.Second})
	a := tcpService("ns", "a", "10.96.0.1", 80, "10.244.0.1:80", "10.244.0.2:80")
	b := tcpService("ns", "b", "10.96.0.2", 80, "10.244.0.2:80", "10.244.0.3:80")
	plain := tcpService("ns", "plain", "10.96.0.3", 80, "10.244.0.2:80")
	a.AffinityTimeout, b.AffinityTimeout = time.Hour, time.Minute
	ma, mb := renderService(&a, ipv4).affinity[0], renderService(&b, ipv4).affinity[0]
	shared := recordChainName([]string{ma.addr, mb.addr})
	if ma.addr > mb.addr {
		shared = recordChainName([]string{mb.addr, ma.addr})
	}
	onlyA, onlyB := recordChainName([]string{ma.addr}), recordChainName([]string{mb.addr})

	leadsTo := func(endpoint string) string {
		t.Helper()
		addr, port := splitEndpoint(endpoint)
		e := fake.Table.Maps[mapAffinityEndpoints].FindElement(addr, "tcp", port)
		if e == nil {
			return ""
		}
		return e.Value[0]
	}
	step := func(name string, services []Service, want map[string]string) {
		t.Helper()
		mustSync(t, s, services, false)
		for ep, chain := range want {
			if got, wantGoto := leadsTo(ep), "goto "+chain; (chain == "" && got != "") || (chain != "" && got != wantGoto) {
				t.Errorf("%s: %s leads to %q, want %q", name, ep, got, wantGoto)
			}
		}
		if got, want := canonicalDump(fake), freshRender(t, services, Options{}); got != want {
			t.Errorf("%s: differs from a fresh render:\n%s", name, lineDiff(want, got))
		}
	}

	mustSync(t, s, []Service{plain}, true)
	step("two affinity Services", []Service{a, b, plain}, map[string]string{
		"10.244.0.1 . 80": onlyA, "10.244.0.2 . 80": shared, "10.244.0.3 . 80": onlyB})
	if c := fake.Table.Chains[shared]; c == nil || len(c.Rules) != 2 {
		t.Fatalf("shared record chain %s = %+v, want a rule for each Service", shared, c)
	}
	clock.Advance(time.Second)
	step("one gone", []Service{a, plain}, map[string]string{
		"10.244.0.1 . 80": onlyA, "10.244.0.2 . 80": onlyA, "10.244.0.3 . 80": ""})
	for _, name := range []string{shared, onlyB} {
		if c := fake.Table.Chains[name]; c != nil && len(c.Rules) != 0 {
			t.Errorf("record chain %s still has rules", name)
		}
	}
	clock.Advance(time.Second)
	a.AffinityTimeout = 0
	step("affinity off", []Service{a, plain}, map[string]string{"10.244.0.1 . 80": "", "10.244.0.2 . 80": ""})
	clock.Advance(time.Second)
	mustSync(t, s, []Service{a, plain}, false)
	if len(s.state.records.byEndpoint) != 0 || len(s.state.records.chainRefs) != 0 {
		t.Errorf("recordings left: %+v", s.state.records)
	}
	for name := range fake.Table.Chains {
		if slices.Contains([]string{shared, onlyA, onlyB}, name) {
			t.Errorf("record chain %s not deleted", name)
		}
	}
}
