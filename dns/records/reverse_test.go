package records

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func reverse(t *testing.T, addr string) string {
	t.Helper()
	name, err := dns.ReverseAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func TestRespondPTR(t *testing.T) {
	v4soa := []string{"SOA in-addr.arpa. 5"}
	v6soa := []string{"SOA ip6.arpa. 5"}
	runRespondCases(t, []respondCase{
		{"clusterset ip", reverse(t, "10.0.0.10"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR web.demo.svc.clusterset.local."}, nil, nil},
		{"clusterset ip v6 nibbles", reverse(t, "fd00:10::10"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR web.demo.svc.clusterset.local."}, nil, nil},
		{"headless endpoint", reverse(t, "10.2.0.5"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR db-0.west.db.demo.svc.clusterset.local."}, nil, nil},
		{"headless endpoint v6", reverse(t, "fd00:2::5"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR db-0.west.db.demo.svc.clusterset.local."}, nil, nil},
		{"headless endpoint without hostname", reverse(t, "10.1.0.6"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR 10-1-0-6.east.db.demo.svc.clusterset.local."}, nil, nil},
		{"dotted cluster id", reverse(t, "10.3.0.5"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR db-1.zone.b.db.demo.svc.clusterset.local."}, nil, nil},
		{"one PTR for an address of two Services, the lowest name", reverse(t, "10.1.0.5"), dns.TypePTR, dns.RcodeSuccess, []string{"PTR cache-0.east.cache.shared.svc.clusterset.local."}, nil, nil},
		{"unknown address is NXDOMAIN", reverse(t, "10.9.9.9"), dns.TypePTR, dns.RcodeNameError, nil, v4soa, nil},
		{"unknown v6 address is NXDOMAIN", reverse(t, "fd00:2::6"), dns.TypePTR, dns.RcodeNameError, nil, v6soa, nil},
		{"A at a reverse name is NODATA", reverse(t, "10.0.0.10"), dns.TypeA, dns.RcodeSuccess, nil, v4soa, nil},
		{"prefix with addresses is an empty non-terminal", "0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, nil, v4soa, nil},
		{"shorter prefix too", "10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, nil, v4soa, nil},
		{"v6 prefix with addresses", "0.0.d.f.ip6.arpa.", dns.TypePTR, dns.RcodeSuccess, nil, v6soa, nil},
		{"prefix without addresses is NXDOMAIN", "9.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, v4soa, nil},
		{"leading zero is no address", "05.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, v4soa, nil},
		{"five octets is no address", "1.5.0.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError, nil, v4soa, nil},
		{"case-insensitive nibbles", "0.0.D.F.ip6.arpa.", dns.TypePTR, dns.RcodeSuccess, nil, v6soa, nil},
		{"reverse apex SOA", "in-addr.arpa.", dns.TypeSOA, dns.RcodeSuccess, v4soa, nil, nil},
	})
}

func TestRespondPTRPointsIntoTheConfiguredZone(t *testing.T) {
	z := v4Zone
	z.Clusterset = "mcs.example."
	m := Respond(z, testLookup(), new(dns.Msg).SetQuestion(reverse(t, "10.0.0.10"), dns.TypePTR))
	if len(m.Answer) != 1 || m.Answer[0].(*dns.PTR).Ptr != "web.demo.svc.mcs.example." {
		t.Fatalf("answer %v, want web.demo.svc.mcs.example.", m.Answer)
	}
}

func TestParseReverseInvertsReverseAddr(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		for _, addr := range []netip.Addr{netip.AddrFrom4([4]byte(b[:4])), netip.AddrFrom16(b)} {
			got, ok := ParseReverse(reverse(t, addr.String()))
			if !ok || got != netip.PrefixFrom(addr, addr.BitLen()) {
				t.Fatalf("%v: parsed %v %v", addr, got, ok)
			}
		}
	}
	for name, want := range map[string]string{
		"0.1.10.in-addr.arpa.": "10.1.0.0/24",
		"in-addr.arpa.":        "0.0.0.0/0",
		"d.f.ip6.arpa.":        "fd00::/8",
		"0.0.d.f.ip6.arpa.":    "fd00::/16",
		"1.0.0.d.f.ip6.arpa.":  "fd00:1000::/20",
	} {
		if got, ok := ParseReverse(name); !ok || got.String() != want {
			t.Errorf("%s: %v %v, want %s", name, got, ok, want)
		}
	}
	for _, name := range []string{"256.1.10.in-addr.arpa.", "-1.in-addr.arpa.", "00.in-addr.arpa.", "10.ip6.arpa.", "g.ip6.arpa.", "0/26.1.10.in-addr.arpa.", "example.org."} {
		if got, ok := ParseReverse(name); ok {
			t.Errorf("%s parsed as %v", name, got)
		}
	}
}

// knownNames lists every name the test lookup's records live at, worked out from the Services'
// data rather than by Respond: the oracle the RFC 8020 checks compare with.
func knownNames(l mapLookup) []string {
	names := []string{"dns-version." + testZone.Name}
	for k, svc := range l {
		ns, name, _ := strings.Cut(k, "/")
		base := name + "." + ns + ".svc." + testZone.Name
		if svc.Headless && len(svc.Endpoints) == 0 {
			continue
		}
		names = append(names, base)
		ports := svc.Ports
		for _, e := range svc.Endpoints {
			names = append(names, e.Hostname+"."+e.Cluster+"."+base)
			ports = append(ports, e.Ports...)
		}
		for _, p := range ports {
			if p.Name != "" {
				names = append(names, "_"+p.Name+"._"+p.Protocol+"."+base)
			}
		}
		for _, a := range svc.AddressNames(ns, name) {
			rev, _ := dns.ReverseAddr(a.Addr.String())
			names = append(names, rev)
		}
	}
	return names
}

// TestEveryNameAndItsAncestorsExist is RFC 8020 from the other side: each name with records,
// and every name between it and its zone, answers NOERROR.
func TestEveryNameAndItsAncestorsExist(t *testing.T) {
	lookup := testLookup()
	for _, name := range knownNames(lookup) {
		z := zoneFor(name)
		for ancestor := name; dns.IsSubDomain(z.Name, ancestor); {
			m := Respond(z, lookup, new(dns.Msg).SetQuestion(ancestor, dns.TypeA))
			if m.Rcode != dns.RcodeSuccess {
				t.Errorf("%s (above %s) answers %s", ancestor, name, dns.RcodeToString[m.Rcode])
			}
			off, end := dns.NextLabel(ancestor, 0)
			if end {
				break
			}
			ancestor = ancestor[off:]
		}
	}
}
