package dnsbench

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// serveFake answers A queries on loopback: good.test. with 10.0.0.1, wrong.test. with another
// address, and never answers silent.test.
func serveFake(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		name := q.Question[0].Name
		if name == "silent.test." {
			return
		}
		m := new(dns.Msg).SetReply(q)
		ip := "10.0.0.1"
		if name == "wrong.test." {
			ip = "10.0.0.2"
		}
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func TestLoadCountsRightWrongAndLostAnswers(t *testing.T) {
	addr := serveFake(t)
	want := map[string]string{"good.test.": "10.0.0.1", "wrong.test.": "10.0.0.1", "silent.test.": "10.0.0.1"}
	run := func(names ...string) *LoadResult {
		t.Helper()
		res, err := Load{Address: addr, Names: names, Want: want, Workers: 2, Duration: 2 * time.Second,
			MaxQueries: 40, Timeout: 50 * time.Millisecond, Seed: 1}.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("good.test."); res.Sent != 40 || len(res.Latencies) != 40 || res.Wrong+res.Lost != 0 {
		t.Fatalf("good names: sent %d, answered %d, wrong %d, lost %d; want all 40 answered (the query bound)", res.Sent, len(res.Latencies), res.Wrong, res.Lost)
	}
	if res := run("wrong.test."); res.Wrong != 40 || !strings.Contains(res.FirstWrong, "10.0.0.2") {
		t.Fatalf("a wrong address: %d wrong (%q), want 40", res.Wrong, res.FirstWrong)
	}
	if res := run("silent.test."); res.Lost == 0 || len(res.Latencies) != 0 {
		t.Fatalf("no answers: %d lost, %d answered", res.Lost, len(res.Latencies))
	}
	// The duration bounds a load that the query count does not.
	start := time.Now()
	res, err := Load{Address: addr, Names: []string{"good.test."}, Want: want, Workers: 1, Duration: 200 * time.Millisecond,
		MaxQueries: 1 << 30, Timeout: time.Second}.Run(context.Background())
	if err != nil || time.Since(start) > 2*time.Second || res.QPS() <= 0 {
		t.Fatalf("a timed load took %s, err %v", time.Since(start), err)
	}
}

func TestCheckWantsExactlyTheOneAddress(t *testing.T) {
	q := new(dns.Msg).SetQuestion("a.test.", dns.TypeA)
	rr := func(ip string) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: "A.test.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.ParseIP(ip)}
	}
	one := new(dns.Msg).SetReply(q)
	one.Answer = []dns.RR{rr("10.0.0.1")}
	two := new(dns.Msg).SetReply(q)
	two.Answer = []dns.RR{rr("10.0.0.1"), rr("10.0.0.3")}
	nx := new(dns.Msg).SetRcode(q, dns.RcodeNameError)
	for _, tc := range []struct {
		m    *dns.Msg
		want string
	}{{one, ""}, {two, "answered"}, {nx, "NXDOMAIN"}, {new(dns.Msg).SetReply(q), "answered []"}} {
		if got := check(tc.m, "a.test.", "10.0.0.1"); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("check = %q, want %q", got, tc.want)
		}
	}
}

func TestChecksFlagBrokenRuns(t *testing.T) {
	good := zoneRun{zone: "clusterset.local", result: LoadResult{Sent: 2, Latencies: []time.Duration{time.Millisecond, time.Millisecond}}}
	if c := answeredCheck(10, good); !c.Passed() {
		t.Fatalf("a clean run failed: %s", c.Failure)
	}
	lost := good
	lost.result.Lost = 1
	wrong := good
	wrong.result.Wrong, wrong.result.FirstWrong = 1, "x: NXDOMAIN"
	for _, z := range []zoneRun{lost, wrong, {zone: "cluster.local"}} {
		if c := answeredCheck(10, z); c.Passed() {
			t.Errorf("%+v passed", z.result)
		}
	}
	if c := propagationCheck(10, &propagation{FromStored: []time.Duration{3 * time.Millisecond}}); !c.Passed() {
		t.Fatalf("a fast import failed: %s", c.Failure)
	}
	for _, p := range []*propagation{{FromStored: []time.Duration{time.Millisecond, 1500 * time.Millisecond}}, {Missing: 1, FirstMissing: "x"}, {}} {
		if c := propagationCheck(10, p); c.Passed() {
			t.Errorf("%+v passed", p)
		}
	}
}

func TestReportHasBothZonesSideBySide(t *testing.T) {
	res := LoadResult{Elapsed: time.Second, Sent: 3, Latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}}
	p := &propagation{FromStored: []time.Duration{2 * time.Millisecond}, FromCall: []time.Duration{4 * time.Millisecond}}
	r := report(settings{workers: 8, duration: time.Second, rounds: 1, samples: 1},
		[]sizeRun{{services: 1000, zones: []zoneRun{{"clusterset.local", res}, {"cluster.local", res}}, clusterset: p, cluster: p}})
	rows := r.Tables[0].Rows
	if len(rows) != 2 || rows[0][1] != "clusterset.local (fleetslice clusterset)" || rows[1][1] != "cluster.local (CoreDNS kubernetes)" || rows[0][3] != "3" || rows[0][7] != "1.00×" {
		t.Fatalf("load rows %v", rows)
	}
	if prop := r.Tables[1].Rows[0]; prop[3] != "2.0 ms" || prop[6] != "4.0 ms" {
		t.Fatalf("propagation row %v", prop)
	}
	for _, c := range r.Checks {
		if !c.Passed() {
			t.Errorf("%s: %s", c.Name, c.Failure)
		}
	}
}

func TestBadSettingsAreRefused(t *testing.T) {
	for _, o := range []settings{{workers: 8, sizes: []int{0}}, {workers: 0}, {workers: 8, sizes: []int{MaxServices + 1}}, {workers: 8, duration: time.Hour}} {
		if _, err := o.resolve(true); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestFreePortIsFreeForBothProtocols checks that the server's port can be bound for UDP and TCP,
// as CoreDNS binds both.
func TestFreePortIsFreeForBothProtocols(t *testing.T) {
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("port %d not free for UDP: %v", port, err)
		}
		l, err := net.Listen("tcp", addr)
		u.Close()
		if err != nil {
			t.Fatalf("port %d not free for TCP: %v", port, err)
		}
		l.Close()
	}
}

func TestLogTailShowsTheEndOfTheServersOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleetslice-dns.log")
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprint("line ", i))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := (&server{log: path}).logTail()
	if want := strings.Join(lines[10:], "\n"); got != want {
		t.Fatalf("logTail = %q, want the last 20 lines", got)
	}
}
