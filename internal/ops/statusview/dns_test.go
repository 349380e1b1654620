package statusview

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// fakeDNS answers like a member's DNS: web has a v4 address, db is headless over two clusters
// and has a v6 one too, gone is not imported, and slow times out.
func fakeDNS(_ context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg).SetQuestion(name, qtype)
	hdr := dns.RR_Header{Name: dns.Fqdn(name), Class: dns.ClassINET, Rrtype: qtype, Ttl: 5}
	switch {
	case strings.HasPrefix(name, "slow."):
		return nil, errors.New("i/o timeout")
	case strings.HasPrefix(name, "mute."):
		return nil, nil
	case strings.HasPrefix(name, "gone."):
		m.Rcode = dns.RcodeNameError
	case name == "web.demo.svc.clusterset.local" && qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.ParseIP("10.96.0.10")})
	case name == "db.demo.svc.clusterset.local" && qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: net.ParseIP("10.1.0.5")}, &dns.A{Hdr: hdr, A: net.ParseIP("10.2.0.7")})
	case name == "db.demo.svc.clusterset.local" && qtype == dns.TypeAAAA:
		m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.ParseIP("fd00::5")})
	}
	return m, nil
}

func TestResolveImportsShowsWhatTheMembersDNSAnswers(t *testing.T) {
	view := &Cluster{Name: "cluster-2", Imports: []Import{
		{Namespace: "demo", Name: "web", Type: "ClusterSetIP", IPs: []string{"10.96.0.10"}, Ready: "True"},
		{Namespace: "demo", Name: "db", Type: "Headless", Ready: "True"},
		{Namespace: "demo", Name: "gone", Type: "ClusterSetIP", Ready: "False"},
		{Namespace: "demo", Name: "slow", Type: "ClusterSetIP", Ready: "True"},
		{Namespace: "demo", Name: "mute", Type: "ClusterSetIP", Ready: "True"},
	}}
	ResolveImports(context.Background(), view, fakeDNS)
	want := []string{"10.96.0.10", "10.1.0.5,10.2.0.7,fd00::5", "NXDOMAIN", "A: i/o timeout; AAAA: i/o timeout", "A: no reply; AAAA: no reply"}
	for i, w := range want {
		if got := view.Imports[i].Resolves; got != w {
			t.Errorf("%s resolves to %q, want %q", view.Imports[i].Name, got, w)
		}
	}
	var out bytes.Buffer
	if err := Render(&out, []Cluster{*view}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	for i, want := range [][]string{
		{"SERVICEIMPORT", "TYPE", "IPS", "CLUSTERS", "READY", "DNS", "NAME", "RESOLVES", "HERE", "TO"},
		{"demo/web", "ClusterSetIP", "10.96.0.10", "-", "True", "web.demo.svc.clusterset.local", "10.96.0.10"},
		{"demo/db", "Headless", "-", "-", "True", "db.demo.svc.clusterset.local", "10.1.0.5,10.2.0.7,fd00::5"},
		{"demo/gone", "ClusterSetIP", "-", "-", "False", "gone.demo.svc.clusterset.local", "NXDOMAIN"},
	} {
		if got := strings.Fields(lines[i+1]); !slices.Equal(got, want) {
			t.Errorf("line %d = %q, want %q", i+1, got, want)
		}
	}
}

func TestImportsWithoutDNSKeepTheirColumns(t *testing.T) {
	var out bytes.Buffer
	if err := Render(&out, []Cluster{{Name: "c", Imports: []Import{{Namespace: "demo", Name: "web", Ready: "True"}}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "DNS NAME") {
		t.Fatalf("a view nobody resolved shows DNS columns:\n%s", out.String())
	}
}
