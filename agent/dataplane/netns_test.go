package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/selection"
)

// Addresses exist only inside the test's namespaces: hosts on 10.200.0.0/24
// behind one bridge, and a cluster IP from 10.201.0.0/24 that no host owns.
const (
	testClientIP  = "10.200.0.2"
	testClusterIP = "10.201.0.10"
	testNodePort  = 30080
	backendPort   = 8080
)

type testBackend struct {
	name, zone, ip string
}

var testBackends = []testBackend{
	{"backend-1", "zone-a", "10.200.0.11"},
	{"backend-2", "zone-a", "10.200.0.12"},
	{"backend-3", "zone-b", "10.200.0.13"},
}

// lab is a client host and backends on one L2 segment, each in its own
// network namespace, plus a namespace holding the bridge.
type lab struct {
	client *nsThread
}

func newLab(t *testing.T) *lab {
	prefix := uniquePrefix(t)
	bridge := newNetns(t, prefix, "br")
	run(t, "ip", "-n", bridge, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", bridge, "link", "set", "br0", "up")
	attach := func(host, port, addr string) {
		run(t, "ip", "-n", bridge, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host)
		run(t, "ip", "-n", bridge, "link", "set", port, "master", "br0", "up")
		run(t, "ip", "-n", host, "addr", "add", addr+"/24", "dev", "eth0")
		run(t, "ip", "-n", host, "link", "set", "eth0", "up")
	}
	client := newNetns(t, prefix, "client")
	attach(client, "vc", testClientIP)
	// The cluster IP must be routable before DNAT picks the real target.
	run(t, "ip", "-n", client, "route", "add", "default", "dev", "eth0")
	for i, b := range testBackends {
		ns := newNetns(t, prefix, fmt.Sprintf("b%d", i+1))
		attach(ns, fmt.Sprintf("vb%d", i+1), b.ip)
		startBackend(t, ns, b)
	}
	return &lab{client: enterNetns(t, client)}
}

// startBackend serves HTTP answering the backend's name. The listening
// socket is created on a thread inside the backend's namespace; serving it
// from any goroutine afterwards stays in that namespace. The server is
// closed when the test ends.
func startBackend(t *testing.T, ns string, b testBackend) {
	var ln net.Listener
	var err error
	enterNetns(t, ns).do(func() {
		ln, err = net.Listen("tcp", net.JoinHostPort(b.ip, fmt.Sprint(backendPort)))
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", ns, err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, b.name) }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// get makes one HTTP request from the client namespace and returns the
// body, or the dial error.
func (l *lab) get(target string) (body string, err error) {
	l.client.do(func() {
		var conn net.Conn
		conn, err = net.DialTimeout("tcp", target, 3*time.Second)
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		req, _ := http.NewRequest(http.MethodGet, "http://"+target+"/", nil)
		req.Close = true
		if err = req.Write(conn); err != nil {
			return
		}
		var resp *http.Response
		if resp, err = http.ReadResponse(bufio.NewReader(conn), req); err != nil {
			return
		}
		defer resp.Body.Close()
		var b []byte
		b, err = io.ReadAll(resp.Body)
		body = string(b)
	})
	return body, err
}

// answers sends n requests and returns the sorted set of backends that
// answered.
func (l *lab) answers(t *testing.T, target string, n int) []string {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		body, err := l.get(target)
		if err != nil {
			t.Fatalf("request %d to %s: %v", i, target, err)
		}
		seen[body] = true
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// endpointsFor plays the agent's role: select endpoints for the client's
// node from slice-like endpoints, then convert them for the dataplane.
func endpointsFor(backends []testBackend, hints bool) []Endpoint {
	var slice []selection.Endpoint
	for _, b := range backends {
		e := selection.Endpoint{Address: b.ip, Ready: true, Serving: true, NodeName: b.name, Zone: b.zone}
		if hints {
			e.ZoneHints = []string{b.zone}
		}
		slice = append(slice, e)
	}
	node := selection.Node{Name: "client-node", Zone: "zone-a"}
	res := selection.Select(selection.Service{ExternallyAccessible: true}, slice, node)
	var out []Endpoint
	for _, e := range res.Cluster {
		out = append(out, Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr(e.Address), backendPort)})
	}
	return out
}

func labService(endpoints []Endpoint, affinity time.Duration) Service {
	return Service{
		Namespace: "lab", Name: "web", ClusterIPs: ips(testClusterIP), AffinityTimeout: affinity,
		Ports: []Port{{Name: "http", Protocol: TCP, Port: 80, NodePort: testNodePort, Endpoints: endpoints}},
	}
}

func names(backends ...testBackend) []string {
	var out []string
	for _, b := range backends {
		out = append(out, b.name)
	}
	return out
}

func TestKernelClusterIPFollowsSelection(t *testing.T) {
	requireKernel(t)
	l := newLab(t)

	// A table of someone else's that must survive all our syncs, full ones
	// included.
	l.client.do(func() {
		cmd := exec.Command("nft", "add table ip bystander; add chain ip bystander keep; add rule ip bystander keep counter")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("creating bystander table: %v: %s", err, out)
		}
	})
	for _, backend := range kernelBackends {
		t.Run(backend, func(t *testing.T) {
			syncer, _ := openBackend(t, l.client, backend, knftables.IPv4Family, Options{})
			clusterIPFollowsSelection(t, l, syncer)
		})
	}
	l.client.do(func() {
		out, err := exec.Command("nft", "list", "table", "ip", "bystander").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "chain keep") {
			t.Errorf("bystander table damaged: %v: %s", err, out)
		}
	})
}

func clusterIPFollowsSelection(t *testing.T, l *lab, syncer *Syncer) {
	ctx := context.Background()
	var err error
	sync := func(step string, full bool, services ...Service) {
		t.Helper()
		var st Stats
		l.client.do(func() { st, err = syncer.Sync(ctx, services, full) })
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		t.Logf("%s: %+v", step, st)
	}
	clusterIP := net.JoinHostPort(testClusterIP, "80")
	nodePort := net.JoinHostPort(testClientIP, fmt.Sprint(testNodePort))
	expect := func(step, target string, n int, want []string) {
		t.Helper()
		if got := l.answers(t, target, n); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: answers from %v, want %v", step, got, want)
		}
	}

	sync("zone hints", false, labService(endpointsFor(testBackends, true), 0))
	// 60 requests miss one of two backends with probability 2^-59.
	expect("zone hints", clusterIP, 60, names(testBackends[0], testBackends[1]))

	sync("no hints", false, labService(endpointsFor(testBackends, false), 0))
	expect("no hints", clusterIP, 90, names(testBackends...))
	expect("no hints, node port", nodePort, 90, names(testBackends...))

	sync("backend-1 removed", false, labService(endpointsFor(testBackends[1:], false), 0))
	expect("backend-1 removed", clusterIP, 60, names(testBackends[1:]...))

	sync("affinity", false, labService(endpointsFor(testBackends, false), time.Minute))
	if got := l.answers(t, clusterIP, 20); len(got) != 1 {
		t.Errorf("affinity: answers from %v, want a single backend", got)
	}

	sync("full resync", true, labService(endpointsFor(testBackends, false), 0))
	expect("full resync", clusterIP, 90, names(testBackends...))

	sync("no endpoints", false, labService(nil, 0))
	for _, target := range []string{clusterIP, nodePort} {
		start := time.Now()
		_, err := l.get(target)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("no endpoints: %s gave %v, want connection refused", target, err)
		}
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("no endpoints: refusal of %s took %v", target, elapsed)
		}
	}

}

// TestKernelIncrementalSequence replays a long random change sequence
// against the kernel, which, unlike the fake, refuses invalid orderings
// (changed map values, chains still referenced), and then compares the
// table with a full rebuild made in a second namespace.
func TestKernelIncrementalSequence(t *testing.T) {
	requireKernel(t)
	for _, backend := range kernelBackends {
		t.Run(backend, func(t *testing.T) { incrementalSequence(t, backend) })
	}
}

// incrementalSequence runs the incremental syncs through backend and the full rebuild
// through nft, so the netlink backend is held to what nft programs.
func incrementalSequence(t *testing.T, backend string) {
	prefix := uniquePrefix(t)
	incremental := enterNetns(t, newNetns(t, prefix, "inc"))
	rebuilt := enterNetns(t, newNetns(t, prefix, "full"))
	ctx := context.Background()
	opts := Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	incSyncer, incNFT := openBackend(t, incremental, backend, knftables.IPv4Family, opts)
	fullSyncer, fullNFT := openBackend(t, rebuilt, "nft", knftables.IPv4Family, opts)

	world, present := initialWorld(5)
	x := uint32(777)
	var services []Service
	for step := 0; step < 150; step++ {
		x = x*1664525 + 1013904223
		mutate(world, present, byte(x>>24), byte(x>>16))
		services = snapshot(world, present)
		var err error
		incremental.do(func() { _, err = incSyncer.Sync(ctx, services, false) })
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	time.Sleep(1100 * time.Millisecond) // let stale chains age past the default delay
	var err error
	incremental.do(func() { _, err = incSyncer.Sync(ctx, services, false) })
	if err == nil {
		rebuilt.do(func() { _, err = fullSyncer.Sync(ctx, services, true) })
	}
	if err != nil {
		t.Fatal(err)
	}
	var got, want string
	incremental.do(func() { got, err = describeTable(ctx, incNFT) })
	if err == nil {
		rebuilt.do(func() { want, err = describeTable(ctx, fullNFT) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("kernel table after incremental syncs differs from a full rebuild:\n%s", lineDiff(want, got))
	}
}

// describeTable lists the table in an order-independent form: each chain
// with its rules as the kernel prints them, and every set and map element.
func describeTable(ctx context.Context, nft knftables.Interface) (string, error) {
	var lines []string
	chains, err := nft.List(ctx, "chains")
	if err != nil {
		return "", err
	}
	for _, chain := range chains {
		out, err := exec.CommandContext(ctx, "nft", "list", "chain", "ip", TableName, chain).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("listing chain %s: %v: %s", chain, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "table ") && l != "}" {
				lines = append(lines, chain+": "+l)
			}
		}
	}
	for _, kind := range []string{"set", "map"} {
		names, err := nft.List(ctx, kind+"s")
		if err != nil {
			return "", err
		}
		for _, name := range names {
			elems, err := nft.ListElements(ctx, kind, name)
			if err != nil {
				return "", err
			}
			lines = append(lines, kind+" "+name)
			for _, e := range elems {
				lines = append(lines, fmt.Sprintf("%s %s: %s => %s", kind, name, strings.Join(e.Key, " . "), strings.Join(e.Value, " ")))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// TestKernelAcceptsEveryRenderedShape checks that the kernel takes every
// rule shape the renderer produces, in both families, fully and
// incrementally.
func TestKernelAcceptsEveryRenderedShape(t *testing.T) {
	requireKernel(t)
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "shapes"))
	ctx := context.Background()
	v6 := []Service{
		{Namespace: "six", Name: "web", ClusterIPs: ips("fd00:96::20", "10.96.0.20"), AffinityTimeout: time.Minute, Ports: []Port{
			{Name: "http", Protocol: TCP, Port: 80, NodePort: 30080, Endpoints: []Endpoint{
				{Addr: netip.MustParseAddrPort("[fd00:244::7]:8080"), Local: true}, {Addr: netip.MustParseAddrPort("[fd00:244::8]:8080")},
			}},
			{Name: "sctp", Protocol: SCTP, Port: 9, Endpoints: eps("[fd00:244::7]:9")},
		}},
		{Namespace: "six", Name: "edge", ClusterIPs: ips("fd00:96::50"), Ports: []Port{
			{Name: "http", Protocol: UDP, Port: 53, NodePort: 30053, ExternalLocal: true,
				Endpoints: eps("[fd00:244::9]:53", "[fd00:244::a]:53", "[fd00:244::b]:53"), ExternalEndpoints: eps("[fd00:244::9]:53", "[fd00:244::a]:53")},
		}},
		{Namespace: "six", Name: "sticky-edge", ClusterIPs: ips("fd00:96::60"), AffinityTimeout: time.Hour, Ports: []Port{
			{Name: "http", Protocol: TCP, Port: 80, NodePort: 30060, ExternalLocal: true,
				Endpoints: eps("[fd00:244::c]:80", "[fd00:244::d]:80", "[fd00:244::e]:80"), ExternalEndpoints: eps("[fd00:244::c]:80", "[fd00:244::d]:80")},
		}},
		{Namespace: "six", Name: "gone", ClusterIPs: ips("fd00:96::40"), Ports: []Port{{Name: "x", Protocol: TCP, Port: 1, NodePort: 30001}}},
	}
	cases := []struct {
		family   knftables.Family
		services []Service
		cidrs    []netip.Prefix
	}{
		{knftables.IPv4Family, goldenServices(), []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
		{knftables.IPv6Family, v6, []netip.Prefix{netip.MustParsePrefix("fd00:244::/48")}},
	}
	for _, tc := range cases {
		for _, backend := range kernelBackends {
			s, _ := openBackend(t, ns, backend, tc.family, Options{PodCIDRs: tc.cidrs})
			var err error
			ns.do(func() {
				if _, err = s.Sync(ctx, tc.services, true); err != nil {
					return
				}
				changed := append([]Service(nil), tc.services...)
				changed[0].AffinityTimeout = 0
				changed[1].Ports = nil
				changed = changed[:len(changed)-1]
				if _, err = s.Sync(ctx, changed, false); err != nil {
					return
				}
				_, err = s.Sync(ctx, tc.services, false)
			})
			if err != nil {
				t.Errorf("family %s, %s: %v", tc.family, backend, err)
			}
		}
	}
}
