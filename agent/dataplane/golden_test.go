package dataplane

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the current code")

// TestGoldenTransactions pins, step by step, what both backends are given for fixed scenarios:
// the nft text of every transaction, and the netlink messages the netlink backend sends for the
// same sync (see goldenNetlink). A refactor of planning or rendering must leave every file
// unchanged; a deliberate change of the rules reruns it with -update and shows the diff.
func TestGoldenTransactions(t *testing.T) {
	for _, sc := range goldenScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			g := newGoldenRun(t, sc.opts)
			sc.run(g)
			path := filepath.Join("testdata", "golden", sc.name+".golden")
			got := g.out.String()
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("%s differs from what the scenario now produces:\n%s", path, lineDiff(string(want), got))
			}
		})
	}
}

type goldenScenario struct {
	name string
	opts Options
	run  func(g *goldenRun)
}

var goldenPodCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}

func goldenScenarios() []goldenScenario {
	v4 := Options{PodCIDRs: goldenPodCIDRs, StaleChainDelay: time.Second}
	v6 := Options{Family: knftables.IPv6Family, StaleChainDelay: time.Second,
		PodCIDRs: []netip.Prefix{netip.MustParsePrefix("fd00:244::/48")}}
	return []goldenScenario{
		{"cold-full-v4", v4, func(g *goldenRun) {
			g.sync("full", goldenServices(), true)
			g.sync("unchanged", goldenServices(), false)
			g.sync("forced full", goldenServices(), true)
		}},
		{"cold-full-v6", v6, goldenIPv6},
		{"incremental", v4, goldenIncremental},
		{"sync-changes", v4, goldenSyncChanges},
		{"affinity", v4, goldenAffinity},
		{"forget", v4, goldenForget},
		{"contest", v4, goldenContest},
		{"failure", v4, goldenFailure},
		{"random-1", v4, func(g *goldenRun) { goldenRandom(g, 1) }},
		{"random-2", v4, func(g *goldenRun) { goldenRandom(g, 2) }},
	}
}

func goldenIPv6(g *goldenRun) {
	services := []Service{
		{Namespace: "six", Name: "web", ClusterIPs: ips("fd00:96::20", "10.96.0.20"), Ports: []Port{
			{Name: "http", Protocol: TCP, Port: 80, NodePort: 30080, Endpoints: eps("[fd00:244::7]:8080", "[fd00:244::8]:8080")},
			{Name: "dns", Protocol: UDP, Port: 53, Endpoints: eps("[fd00:244::7]:53")},
		}},
		{Namespace: "six", Name: "sticky", ClusterIPs: ips("fd00:96::30"), AffinityTimeout: time.Minute, Ports: []Port{
			{Name: "s", Protocol: SCTP, Port: 9, NodePort: 30090, Endpoints: []Endpoint{
				{Addr: netip.MustParseAddrPort("[fd00:244::9]:99"), Local: true}, {Addr: netip.MustParseAddrPort("[fd00:244::a]:99")}}},
		}},
		{Namespace: "six", Name: "edge", ClusterIPs: ips("fd00:96::50"), Ports: []Port{
			{Name: "http", Protocol: TCP, Port: 80, NodePort: 30050, ExternalLocal: true,
				Endpoints: eps("[fd00:244::1]:80", "[fd00:244::2]:80"), ExternalEndpoints: eps("[fd00:244::1]:80")}}},
		{Namespace: "six", Name: "gone", ClusterIPs: ips("fd00:96::40"), Ports: []Port{{Name: "x", Protocol: TCP, Port: 1, NodePort: 30001}}},
		tcpService("four", "only", "10.96.0.2", 80, "10.244.0.7:80"),
	}
	g.sync("full", services, true)
	services[0].Ports[0].Endpoints = eps("[fd00:244::7]:8080")
	g.sync("endpoint gone", services, false)
	services[1].Ports[0].Endpoints = services[1].Ports[0].Endpoints[1:]
	g.sync("affinity endpoint gone", services, false)
	g.advance(time.Second)
	g.sync("second look and cleanup", services, false)
}

func goldenIncremental(g *goldenRun) {
	services := manyServices(6)
	g.sync("full", services, false) // the first sync is full anyway
	services[1].Ports[0].Endpoints = eps("10.244.1.2:8080", "10.244.9.2:8080")
	g.sync("endpoint replaced", services, false)
	services[2].Ports[0].Endpoints = eps("10.244.1.3:8080", "10.244.2.3:8080", "10.244.3.3:8080")
	g.sync("endpoint added: new pick chain", services, false)
	services[2].Ports[0].Endpoints[1].Weight = 3
	g.sync("weight", services, false)
	services[3].Ports[0].Endpoints = nil
	g.sync("no endpoints", services, false)
	services[4].Ports[0].NodePort = 30004
	g.sync("node port added", services, false)
	services[4].Ports[0].ExternalLocal = true
	services[4].Ports[0].ExternalEndpoints = services[4].Ports[0].Endpoints[:1]
	g.sync("external local", services, false)
	services[4].Ports[0].ExternalEndpoints = nil
	g.sync("no local endpoint", services, false)
	services[5].Ports[0].Port = 8080
	services[5].Ports[0].Endpoints[0].Local = true
	g.sync("port number and hairpin", services, false)
	services = append(services[:2], services[3:]...)
	g.sync("removed", services, false)
	services = append(services, tcpService("ns", "new", "10.96.2.1", 443, "10.244.5.1:8443"))
	services = append(services, Service{Namespace: "ns", Name: "multi", ClusterIPs: ips("10.96.2.2", "242.1.0.2"), Ports: []Port{
		{Name: "a", Protocol: UDP, Port: 53, Endpoints: eps("10.244.5.2:53")},
		{Name: "b", Protocol: SCTP, Port: 99, NodePort: 30099, Endpoints: eps("10.244.5.2:99", "10.244.5.3:99")}}})
	g.sync("added", services, false)
	g.advance(500 * time.Millisecond)
	g.sync("before the stale delay", services, false)
	g.advance(time.Second)
	g.sync("stale chains deleted", services, false)
	services = services[:1]
	g.sync("most removed", services, false)
	g.advance(time.Second)
	g.sync("cleanup", services, false)
}

func goldenSyncChanges(g *goldenRun) {
	services := manyServices(4)
	g.sync("full", services, true)
	services[0].Ports[0].Endpoints = eps("10.244.7.1:8080")
	g.changes("one changed", services[:1], nil)
	g.changes("one removed", nil, []string{services[1].Key()})
	extra := tcpService("ns", "extra", "10.96.3.1", 80, "10.244.3.1:80", "10.244.3.2:80", "10.244.3.3:80")
	g.changes("one added", []Service{extra}, []string{"ns/never-existed"})
	clash := tcpService("ns", "aaa", "10.96.3.1", 80, "10.244.3.9:80")
	g.changes("a contender declines", []Service{clash}, nil)
	g.advance(time.Second)
	g.changes("cleanup told nothing", nil, nil)
	invalid := services[2]
	invalid.Ports = []Port{{Protocol: "icmp", Port: 1}}
	g.changes("an invalid one leaves", []Service{invalid}, nil)
}

func goldenAffinity(g *goldenRun) {
	a := tcpService("ns", "a", "10.96.0.1", 80, "10.244.0.1:80", "10.244.0.2:80")
	b := tcpService("ns", "b", "10.96.0.2", 80, "10.244.0.2:80", "10.244.0.3:80")
	plain := tcpService("ns", "plain", "10.96.0.3", 80, "10.244.0.2:80")
	a.AffinityTimeout, b.AffinityTimeout = time.Hour, time.Minute
	b.Ports[0].NodePort = 30002
	g.sync("plain", []Service{plain}, true)
	g.sync("two affinity Services share an endpoint", []Service{a, b, plain}, false)
	b.Ports[0].ExternalLocal = true
	b.Ports[0].ExternalEndpoints = eps("10.244.0.3:80")
	g.sync("external local maps", []Service{a, b, plain}, false)
	g.advance(time.Second)
	g.sync("one gone", []Service{a, plain}, false)
	a.AffinityTimeout = 2 * time.Hour
	g.sync("timeout changed", []Service{a, plain}, false)
	g.advance(time.Second)
	a.AffinityTimeout = 0
	g.sync("affinity off", []Service{a, plain}, false)
	g.advance(time.Second)
	g.sync("cleanup", []Service{a, plain}, false)
	g.sync("full again", []Service{a, b, plain}, true)
}

func goldenForget(g *goldenRun) {
	svc := tcpService("ns", "sticky", "10.96.0.1", 80, "10.244.0.1:80", "10.244.0.2:80", "10.244.0.3:80")
	svc.AffinityTimeout = time.Hour
	other := tcpService("ns", "other", "10.96.0.2", 80, "10.244.0.1:80")
	other.AffinityTimeout = time.Hour
	g.sync("full", []Service{svc, other}, true)
	m := renderService(&svc, g.fam).affinity[0]
	g.client(m, "10.1.0.1", "10.244.0.1 . 80")
	g.client(m, "10.1.0.2", "10.244.0.2 . 80")
	g.client(m, "10.1.0.3", "10.244.0.3 . 80")
	g.halfClient(m, "10.1.0.9", "80")
	svc.Ports[0].Endpoints = eps("10.244.0.2:80", "10.244.0.3:80")
	g.sync("endpoint gone: its clients forgotten", []Service{svc, other}, false)
	g.client(m, "10.1.0.4", "10.244.0.1 . 80")
	g.advance(500 * time.Millisecond)
	g.sync("second look not due", []Service{svc, other}, false)
	g.advance(500 * time.Millisecond)
	g.sync("second look", []Service{svc, other}, false)
	svc.Ports[0].Endpoints = eps("10.244.0.3:80")
	g.sync("another endpoint gone", []Service{svc, other}, false)
	g.sync("Service removed before the second look", []Service{other}, false)
	g.advance(time.Second)
	g.sync("settled", []Service{other}, false)
	g.advance(time.Hour)
	g.sync("nothing left", []Service{other}, false)
}

func goldenContest(g *goldenRun) {
	old := tcpService("b", "old", "10.96.0.1", 80, "10.244.0.1:80")
	other := tcpService("c", "other", "10.96.0.2", 80, "10.244.0.2:80")
	other.Ports[0].NodePort = 30000
	g.sync("full", []Service{old, other}, true)
	newcomer := tcpService("a", "new", "10.96.0.1", 80, "10.244.0.9:80")
	np := tcpService("d", "np", "10.96.0.4", 80, "10.244.0.4:80")
	np.Ports[0].NodePort = 30000
	g.sync("newcomer wins, node port loses", []Service{other, old, newcomer, np}, false)
	g.sync("newcomer gone", []Service{old, other, np}, false)
	g.sync("duplicates and invalid", []Service{old, old, other, {Namespace: "x", Name: "bad", ClusterIPs: ips("10.96.0.9"),
		Ports: []Port{{Protocol: TCP}}}}, false)
}

func goldenFailure(g *goldenRun) {
	services := manyServices(3)
	g.sync("full", services, true)
	services[1].Ports[0].Endpoints = eps("10.244.9.9:80")
	g.failNext()
	g.sync("refused", services, false)
	g.sync("full sync after the refusal", services, false)
	services[1].AffinityTimeout = time.Minute
	g.sync("affinity", services, false)
	g.failNext()
	g.changes("refused changes", nil, []string{services[0].Key()})
	g.changes("changes need everything", nil, []string{services[0].Key()})
	g.sync("full sync after the refused changes", services[1:], false)
}

// goldenRandom replays fuzz-style changes (see mutate) from a fixed seed, alternating whole
// syncs and change syncs.
func goldenRandom(g *goldenRun, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	world, present := initialWorld(6)
	g.sync("start", snapshot(world, present), true)
	for step := range 30 {
		op, arg := byte(rng.UintN(256)), byte(rng.UintN(256))
		mutate(world, present, op, arg)
		name := fmt.Sprintf("step %d (%d, %d)", step, op, arg)
		if step%2 == 0 {
			g.sync(name, snapshot(world, present), false)
		} else {
			i := int(op) % len(world)
			g.changes(name, snapshot(world[i:i+1], present[i:i+1]), []string{world[i].Key()})
			if g.lastErr != nil && errors.Is(g.lastErr, ErrNeedsEverything) {
				g.sync(name+" everything", snapshot(world, present), false)
			}
		}
		g.advance(time.Duration(rng.UintN(3)) * 500 * time.Millisecond)
	}
}
