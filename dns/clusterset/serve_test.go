package clusterset_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/dns/build"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// propagationLimit is how soon after a change its answer must be served (issue 12).
const propagationLimit = time.Second

type corefileInput string

func (c corefileInput) Body() []byte       { return []byte(c) }
func (c corefileInput) Path() string       { return "Corefile" }
func (c corefileInput) ServerType() string { return "dns" }

// writeKubeconfig writes a kubeconfig for cfg, so the plugin is configured the way users do it.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// serve starts fleetslice-dns on loopback with corefile and returns its UDP and TCP addresses.
func serve(t *testing.T, corefile string) (udp, tcp string) {
	t.Helper()
	build.Install()
	caddy.Quiet = true
	inst, err := caddy.Start(corefileInput(corefile))
	if err != nil {
		t.Fatalf("starting CoreDNS: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	srv := inst.Servers()[0]
	return srv.LocalAddr().String(), srv.Addr().String()
}

type server struct {
	t        *testing.T
	udp, tcp string
}

func (s server) ask(network, name string, qtype uint16) *dns.Msg {
	s.t.Helper()
	addr := s.udp
	if network == "tcp" {
		addr = s.tcp
	}
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	m, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), addr)
	if err != nil {
		s.t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return m
}

// values renders the answer section as sorted record data.
func values(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		out = append(out, strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	slices.Sort(out)
	return out
}

// waitFor polls over UDP until name answers want (rcode and values) and returns how long that
// took since start.
func (s server) waitFor(start time.Time, name string, qtype uint16, rcode int, want ...string) time.Duration {
	s.t.Helper()
	slices.Sort(want)
	deadline := start.Add(10 * time.Second)
	for {
		m := s.ask("udp", name, qtype)
		if m.Rcode == rcode && slices.Equal(values(m), want) {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s %s: still %s %q, want %s %q", name, dns.TypeToString[qtype], dns.RcodeToString[m.Rcode], values(m), dns.RcodeToString[rcode], want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestServesClustersetZoneFromTheAPIServer(t *testing.T) {
	env, err := testenv.Start("dns")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}); err != nil {
		t.Fatal(err)
	}

	udp, tcp := serve(t, fmt.Sprintf(`clusterset.local:0 {
	bind 127.0.0.1
	clusterset {
		kubeconfig %s envtest
		ttl 7
	}
}`, writeKubeconfig(t, env.Config)))
	s := server{t: t, udp: udp, tcp: tcp}
	const web = "web.demo.svc.clusterset.local."
	s.waitFor(time.Now(), web, dns.TypeA, dns.RcodeNameError)

	// A ClusterSetIP import appears ...
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:  mcsv1beta1.ClusterSetIP,
			IPs:   []string{"10.0.0.10"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Protocol: corev1.ProtocolTCP, Port: 8080}},
		},
	}
	// Each wait starts when the API server has accepted the change: what the plugin controls
	// is how soon a stored change is answered. The API call's own time is logged beside it.
	callStart := time.Now()
	if err := c.Create(ctx, imp); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	calls := []time.Duration{start.Sub(callStart)}
	appeared := s.waitFor(start, web, dns.TypeA, dns.RcodeSuccess, "10.0.0.10")
	// ... changes its IPs ...
	imp.Spec.IPs = []string{"10.0.0.20", "fd00:10::20"}
	callStart = time.Now()
	if err := c.Update(ctx, imp); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	calls = append(calls, start.Sub(callStart))
	changed := s.waitFor(start, web, dns.TypeA, dns.RcodeSuccess, "10.0.0.20")

	// A headless import with endpoints in two clusters.
	db := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}},
	}
	if err := c.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, sl := range []*discoveryv1.EndpointSlice{
		builders.MakeImportedSlice("demo", "db-east", "db", "east").Port("pg", 5432).Endpoints(
			discoveryv1.Endpoint{Addresses: []string{"10.1.0.5"}, Hostname: ptr.To("db-0")},
			discoveryv1.Endpoint{Addresses: []string{"10.1.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}).Obj(),
		builders.MakeImportedSlice("demo", "db-west", "db", "west").Port("pg", 5432).Endpoints(
			discoveryv1.Endpoint{Addresses: []string{"10.2.0.5"}, Hostname: ptr.To("db-0")},
			discoveryv1.Endpoint{Addresses: []string{"10.2.0.7"}}).Obj(),
		builders.MakeImportedSlice("demo", "db-west-v6", "db", "west").AddressType(discoveryv1.AddressTypeIPv6).Port("pg", 5432).Endpoints(
			discoveryv1.Endpoint{Addresses: []string{"fd00:2::5"}, Hostname: ptr.To("db-0")}).Obj(),
	} {
		if err := c.Create(ctx, sl); err != nil {
			t.Fatal(err)
		}
	}
	s.waitFor(time.Now(), "db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, "10.1.0.5", "10.2.0.5", "10.2.0.7")
	s.waitFor(time.Now(), "db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, "fd00:2::5")

	tests := []struct {
		name, qname string
		qtype       uint16
		rcode       int
		want        []string
	}{
		{"clusterset ip A", web, dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.20"}},
		{"clusterset ip AAAA", web, dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00:10::20"}},
		{"case-insensitive", "WEB.Demo.SVC.ClusterSet.LOCAL.", dns.TypeA, dns.RcodeSuccess, []string{"10.0.0.20"}},
		{"srv per named port", "_http._tcp." + web, dns.TypeSRV, dns.RcodeSuccess, []string{"0 0 80 " + web}},
		{"not imported", "api.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"headless A across clusters", "db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.1.0.5", "10.2.0.5", "10.2.0.7"}},
		{"headless AAAA", "db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00:2::5"}},
		{"headless hostname", "db-0.west.db.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.2.0.5"}},
		{"headless hostname other family", "db-0.east.db.demo.svc.clusterset.local.", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"headless srv", "_pg._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"0 0 5432 10-2-0-7.west.db.demo.svc.clusterset.local.", "0 0 5432 db-0.east.db.demo.svc.clusterset.local.", "0 0 5432 db-0.west.db.demo.svc.clusterset.local."}},
		{"wrong zone", "web.demo.svc.cluster.local.", dns.TypeA, dns.RcodeRefused, nil},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range tests {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				m := server{t: t, udp: udp, tcp: tcp}.ask(network, tc.qname, tc.qtype)
				if m.Rcode != tc.rcode || !slices.Equal(values(m), tc.want) {
					t.Fatalf("got %s %q, want %s %q", dns.RcodeToString[m.Rcode], values(m), dns.RcodeToString[tc.rcode], tc.want)
				}
				for _, rr := range m.Answer {
					if rr.Header().Ttl != 7 {
						t.Errorf("TTL %d, want the configured 7", rr.Header().Ttl)
					}
				}
				if tc.rcode != dns.RcodeRefused && len(m.Answer) == 0 && (len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA) {
					t.Errorf("negative answer without the zone's SOA: %v", m.Ns)
				}
			})
		}
	}

	// ... and disappears.
	callStart = time.Now()
	if err := c.Delete(ctx, imp); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	calls = append(calls, start.Sub(callStart))
	gone := s.waitFor(start, web, dns.TypeA, dns.RcodeNameError)
	t.Logf("answered after: appear %v, change %v, disappear %v (API calls took %v)", appeared, changed, gone, calls)
	for what, d := range map[string]time.Duration{"appear": appeared, "change": changed, "disappear": gone} {
		if d > propagationLimit {
			t.Errorf("%s answered after %v, more than %v", what, d, propagationLimit)
		}
	}
}

// TestMalformedQueriesGetErrorsNotCrashes sends what no resolver should: garbage, a header
// promising questions that are not there, two questions, and a TCP query padded far past
// anything real. Each gets an error reply or is dropped, and the server answers afterwards.
func TestMalformedQueriesGetErrorsNotCrashes(t *testing.T) {
	env, err := testenv.Start("dns-malformed")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	udp, tcp := serve(t, fmt.Sprintf("clusterset.local:0 {\n\tbind 127.0.0.1\n\tclusterset {\n\t\tkubeconfig %s\n\t}\n}", writeKubeconfig(t, env.Config)))
	s := server{t: t, udp: udp, tcp: tcp}
	s.waitFor(time.Now(), "web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError)

	two := new(dns.Msg).SetQuestion("web.demo.svc.clusterset.local.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "db.demo.svc.clusterset.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	twoWire, err := two.Pack()
	if err != nil {
		t.Fatal(err)
	}
	padded := new(dns.Msg).SetQuestion("web.demo.svc.clusterset.local.", dns.TypeA)
	for range 1400 { // about 60 KiB, just under the TCP message limit
		padded.Extra = append(padded.Extra, &dns.TXT{Hdr: dns.RR_Header{Name: "x.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{strings.Repeat("x", 30)}})
	}
	paddedWire, err := padded.Pack()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, network string
		wire          []byte
	}{
		{"garbage", "udp", []byte("this is not a dns message at all")},
		{"missing question", "udp", []byte{0x12, 0x34, 0x01, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0}},
		{"two questions", "udp", twoWire},
		{"two questions over tcp", "tcp", twoWire},
		{"oversized over tcp", "tcp", paddedWire},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := rawExchange(t, tc.network, map[string]string{"udp": udp, "tcp": tcp}[tc.network], tc.wire)
			if reply != nil && reply.Rcode == dns.RcodeSuccess && len(reply.Answer) > 0 {
				t.Fatalf("malformed query answered: %v", reply)
			}
			s.waitFor(time.Now(), "web.demo.svc.clusterset.local.", dns.TypeA, dns.RcodeNameError)
		})
	}
}

// rawExchange sends wire as is and returns the parsed reply, or nil if the server dropped it.
func rawExchange(t *testing.T, network, addr string, wire []byte) *dns.Msg {
	t.Helper()
	conn, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dc := &dns.Conn{Conn: conn}
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := dc.Write(wire); err != nil {
		return nil
	}
	m, err := dc.ReadMsg()
	if err != nil {
		if os.IsTimeout(err) || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset") {
			return nil
		}
		t.Logf("reply did not parse: %v", err)
		return nil
	}
	return m
}
