package netlinkenc

import (
	"net/netip"
	"testing"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

func TestElementEncodingRefusesBadInput(t *testing.T) {
	clusterPort := &ruleset.Set{Name: "m", Key: []ruleset.Type{ruleset.IPv4Addr, ruleset.InetProto, ruleset.InetService},
		Data: []ruleset.Type{ruleset.VerdictType}}
	d, err := Def(ruleset.IPv4, clusterPort)
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := ruleset.Addr(netip.MustParseAddr("10.0.0.1")), ruleset.Addr(netip.MustParseAddr("fd00::1"))
	tcp, port := ruleset.Proto(ruleset.TCP), ruleset.Port(80)
	drop := &ruleset.Verdict{Kind: ruleset.Drop}
	for _, el := range []*ruleset.Element{
		{Key: []ruleset.Value{v4, tcp}, Verdict: drop},
		{Key: []ruleset.Value{v6, tcp, port}, Verdict: drop},
		{Key: []ruleset.Value{v4, port, tcp}, Verdict: drop},
		{Key: []ruleset.Value{v4, tcp, port}},
		{Key: []ruleset.Value{v4, tcp, port}, Verdict: &ruleset.Verdict{}},
	} {
		if _, err := d.Encode(el, false); err == nil {
			t.Errorf("encoded %+v", el)
		}
	}
	good, err := d.Encode(&ruleset.Element{Key: []ruleset.Value{v4, tcp, port}, Verdict: &ruleset.Verdict{Kind: ruleset.Goto, Chain: "svc-x"}}, false)
	if err != nil || len(good) != 1 || len(good[0].Key) != 12 || good[0].VerdictData == nil || good[0].VerdictData.Chain != "svc-x" {
		t.Errorf("encode = %+v, %v", good, err)
	}
	for _, s := range []*ruleset.Set{
		{Name: "no key"},
		{Name: "numgen data", KeyOf: []ruleset.Field{{Kind: ruleset.Numgen}}, DataOf: []ruleset.Field{{Kind: ruleset.Numgen}}},
		{Name: "saddr", KeyOf: []ruleset.Field{{Kind: ruleset.SAddr}}, DataOf: []ruleset.Field{{Kind: ruleset.DAddr}}},
		{Name: "bad type", Key: []ruleset.Type{99}},
	} {
		if _, err := Def(ruleset.IPv4, s); err == nil {
			t.Errorf("accepted set %q", s.Name)
		}
	}
	if end, ok := prefixEnd(netip.MustParsePrefix("10.244.0.0/16")); !ok || end != netip.MustParseAddr("10.245.0.0") {
		t.Errorf("prefixEnd = %v %v", end, ok)
	}
	if _, ok := prefixEnd(netip.MustParsePrefix("255.0.0.0/8")); ok {
		t.Error("prefixEnd past the end of the space")
	}
}
