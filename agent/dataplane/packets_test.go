package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/selection"
)

// The packet lab: a client namespace, a node namespace holding the agent's table, and
// endpoint namespaces behind a bridge, all on addresses only these namespaces have.
//
//	client 10.210.1.2 ── 10.210.1.1 node 10.210.0.1 ── bridge ── endpoints 10.210.0.11-14
//
// The client reaches cluster IPs (10.211.0.0/24, owned by no one) and NodePorts on
// 10.210.1.1 through the node, which forwards; endpoints route back through the node, so a
// connection whose source is kept (externalTrafficPolicy: Local) still returns through its
// conntrack entry. Each endpoint answers TCP and UDP with its name and the source address it
// saw, which tells where a connection landed and whether it was masqueraded.
const (
	pktClientIP  = "10.210.1.2"
	pktNodeIP    = "10.210.1.1" // the node's address facing the client
	pktNodeInner = "10.210.0.1" // the node's address facing the endpoints
	pktClusterIP = "10.211.0.10"
	pktTCPPort   = 8080
	pktUDPPort   = 5353
	pktNodeName  = "node-1"
)

type pktEndpoint struct {
	name, ip, zone, node string
}

// Two endpoints on this node (ep-1 in zone-a, ep-4 in zone-b), two elsewhere.
var pktEndpoints = []pktEndpoint{
	{"ep-1", "10.210.0.11", "zone-a", pktNodeName},
	{"ep-2", "10.210.0.12", "zone-a", "node-2"},
	{"ep-3", "10.210.0.13", "zone-b", "node-3"},
	{"ep-4", "10.210.0.14", "zone-b", pktNodeName},
}

type packetLab struct {
	client, node *nsThread
	syncer       *Syncer
	// udpPort is the next client port for UDP: every exchange uses a port of its own, so it
	// never reuses a conntrack entry that a previous step's exchange left behind (UDP entries
	// outlive the exchange by 30 s and keep the endpoint they were given).
	udpPort int
}

func newPacketLab(t *testing.T, backend string) *packetLab {
	prefix := uniquePrefix(t)
	br := newNetns(t, prefix, "br")
	node := newNetns(t, prefix, "node")
	client := newNetns(t, prefix, "client")
	run(t, "ip", "-n", br, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", br, "link", "set", "br0", "up")
	addr := func(ns, dev, cidr string) {
		run(t, "ip", "-n", ns, "addr", "add", cidr, "dev", dev)
		run(t, "ip", "-n", ns, "link", "set", dev, "up")
	}
	run(t, "ip", "-n", node, "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", client)
	addr(node, "eth1", pktNodeIP+"/24")
	addr(client, "eth0", pktClientIP+"/24")
	run(t, "ip", "-n", client, "route", "add", "default", "via", pktNodeIP)
	bridgePort := func(ns, port string) {
		run(t, "ip", "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "-n", br, "link", "set", port, "master", "br0", "up")
	}
	bridgePort(node, "vnode")
	addr(node, "eth0", pktNodeInner+"/24")
	// Cluster IPs must be routable on the node for the filter hooks to see them (a real
	// node has a default route); DNAT picks the real target before routing.
	run(t, "ip", "-n", node, "route", "add", "default", "dev", "eth0")
	run(t, "ip", "netns", "exec", node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	for i, ep := range pktEndpoints {
		ns := newNetns(t, prefix, fmt.Sprintf("e%d", i+1))
		bridgePort(ns, fmt.Sprintf("ve%d", i+1))
		addr(ns, "eth0", ep.ip+"/24")
		run(t, "ip", "-n", ns, "route", "add", "default", "via", pktNodeInner)
		startEchoServers(t, ns, ep)
	}
	l := &packetLab{client: enterNetns(t, client), node: enterNetns(t, node), udpPort: 20000}
	// The client plays a pod: its traffic to cluster IPs keeps its source.
	l.syncer, _ = openBackend(t, l.node, backend, knftables.IPv4Family,
		Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.210.1.0/24")}})
	return l
}

// startEchoServers answers every TCP connection and UDP datagram with "<name> <source
// address>". Sockets are opened on a thread inside the endpoint's namespace and stay there;
// they are closed, which ends their goroutines, when the test ends.
func startEchoServers(t *testing.T, ns string, ep pktEndpoint) {
	var ln net.Listener
	var pc net.PacketConn
	var err error
	enterNetns(t, ns).do(func() {
		if ln, err = net.Listen("tcp", net.JoinHostPort(ep.ip, fmt.Sprint(pktTCPPort))); err == nil {
			pc, err = net.ListenPacket("udp", net.JoinHostPort(ep.ip, fmt.Sprint(pktUDPPort)))
		}
	})
	if err != nil {
		t.Fatalf("listening in %s: %v", ns, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
			conn.SetDeadline(time.Now().Add(2 * time.Second))
			io.WriteString(conn, ep.name+" "+host)
			conn.Close()
		}
	}()
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			pc.WriteTo([]byte(ep.name+" "+host), from)
		}
	}()
}

// ask makes one connection (TCP) or exchange (UDP) from the client and returns the answer.
func (l *packetLab) ask(network, target string, timeout time.Duration) (answer string, err error) {
	dialer := net.Dialer{Timeout: timeout}
	if network == "udp" {
		dialer.LocalAddr = &net.UDPAddr{IP: net.ParseIP(pktClientIP), Port: l.udpPort}
		l.udpPort++
	}
	l.client.do(func() {
		var conn net.Conn
		if conn, err = dialer.Dial(network, target); err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(timeout))
		if network == "udp" {
			if _, err = conn.Write([]byte("?")); err != nil {
				return
			}
		}
		buf := make([]byte, 64)
		var n int
		if n, err = conn.Read(buf); err != nil {
			return
		}
		answer = string(buf[:n])
	})
	return answer, err
}

// landings sends n connections and returns the sorted endpoint names that answered and the
// source addresses they saw.
func (l *packetLab) landings(t *testing.T, network, target string, n int) (endpoints, sources []string) {
	t.Helper()
	eps, srcs := map[string]bool{}, map[string]bool{}
	for i := 0; i < n; i++ {
		answer, err := l.ask(network, target, 2*time.Second)
		if err != nil {
			t.Fatalf("%s %s, connection %d: %v", network, target, i, err)
		}
		name, src, _ := strings.Cut(answer, " ")
		eps[name], srcs[src] = true, true
	}
	return sortedSet(eps), sortedSet(srcs)
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (l *packetLab) sync(t *testing.T, step string, svc Service) {
	t.Helper()
	var err error
	l.node.do(func() { _, err = l.syncer.Sync(context.Background(), []Service{svc}, false) })
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// pktService plays the agent: it selects this node's endpoints with package selection, as
// agent.Convert does, for a Service with a TCP and a UDP port, each with a NodePort.
func pktService(eps []pktEndpoint, hints, externalLocal bool, affinity time.Duration) Service {
	var slice []selection.Endpoint
	for _, ep := range eps {
		e := selection.Endpoint{Address: ep.ip, Ready: true, Serving: true, NodeName: ep.node, Zone: ep.zone}
		if hints {
			e.ZoneHints = []string{ep.zone}
		}
		slice = append(slice, e)
	}
	policy := selection.Service{ExternallyAccessible: true, ExternalTrafficLocal: externalLocal}
	res := selection.Select(policy, slice, selection.Node{Name: pktNodeName, Zone: "zone-a"})
	convert := func(list []selection.Endpoint, port uint16) []Endpoint {
		var out []Endpoint
		for _, e := range list {
			out = append(out, Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr(e.Address), port), Local: e.NodeName == pktNodeName})
		}
		return out
	}
	svc := Service{Namespace: "lab", Name: "echo", ClusterIPs: ips(pktClusterIP), AffinityTimeout: affinity}
	for _, p := range []struct {
		name       string
		proto      Protocol
		port, node uint16
		target     uint16
	}{{"tcp", TCP, 80, 30080, pktTCPPort}, {"udp", UDP, 53, 30053, pktUDPPort}} {
		port := Port{Name: p.name, Protocol: p.proto, Port: p.port, NodePort: p.node, Endpoints: convert(res.Cluster, p.target)}
		if externalLocal {
			port.ExternalLocal, port.ExternalEndpoints = true, convert(res.Local, p.target)
		}
		svc.Ports = append(svc.Ports, port)
	}
	return svc
}

func epNames(eps ...pktEndpoint) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, ep.name)
	}
	sort.Strings(out)
	return out
}

// TestKernelPacketsLandWhereSelectionSays sends real TCP connections and UDP exchanges from
// the client to the Service's cluster IP and NodePorts and checks which endpoints answer and
// what source they see, through every shape of endpoint choice the agent programs.
func TestKernelPacketsLandWhereSelectionSays(t *testing.T) {
	requireKernel(t)
	for _, backend := range kernelBackends {
		t.Run(backend, func(t *testing.T) { packetsLand(t, newPacketLab(t, backend)) })
	}
}

func packetsLand(t *testing.T, l *packetLab) {
	clusterTCP, clusterUDP := net.JoinHostPort(pktClusterIP, "80"), net.JoinHostPort(pktClusterIP, "53")
	nodeTCP, nodeUDP := net.JoinHostPort(pktNodeIP, "30080"), net.JoinHostPort(pktNodeIP, "30053")
	all := epNames(pktEndpoints...)
	type check struct {
		network, target string
		want            []string // endpoints that must all answer, and no other
		source          string   // the source address every endpoint must see
	}
	// 80 connections over four endpoints miss one with probability below 4*(3/4)^80 = 4e-10.
	const n = 80
	expect := func(step string, checks ...check) {
		t.Helper()
		for _, c := range checks {
			got, sources := l.landings(t, c.network, c.target, n)
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("%s: %s %s landed on %v, want %v", step, c.network, c.target, got, c.want)
			}
			if strings.Join(sources, ",") != c.source {
				t.Errorf("%s: %s %s arrived from %v, want %s", step, c.network, c.target, sources, c.source)
			}
		}
	}

	l.sync(t, "all ready", pktService(pktEndpoints, false, false, 0))
	expect("spread over ready endpoints",
		check{"tcp", clusterTCP, all, pktClientIP}, // from a pod: source kept
		check{"udp", clusterUDP, all, pktClientIP},
		check{"tcp", nodeTCP, all, pktNodeInner}, // NodePort: masqueraded
		check{"udp", nodeUDP, all, pktNodeInner})

	l.sync(t, "hints", pktService(pktEndpoints, true, false, 0))
	expect("zone hints keep zone-a's endpoints",
		check{"tcp", clusterTCP, epNames(pktEndpoints[0], pktEndpoints[1]), pktClientIP},
		check{"udp", clusterUDP, epNames(pktEndpoints[0], pktEndpoints[1]), pktClientIP})

	l.sync(t, "external local", pktService(pktEndpoints, false, true, 0))
	local := epNames(pktEndpoints[0], pktEndpoints[3])
	expect("externalTrafficPolicy Local",
		check{"tcp", nodeTCP, local, pktClientIP}, // only this node's endpoints, source kept
		check{"udp", nodeUDP, local, pktClientIP},
		check{"tcp", clusterTCP, all, pktClientIP}) // cluster traffic is not affected

	l.sync(t, "external local, one here", pktService(pktEndpoints[:3], false, true, 0))
	expect("externalTrafficPolicy Local with one local endpoint",
		check{"tcp", nodeTCP, epNames(pktEndpoints[0]), pktClientIP})

	l.sync(t, "external local, none here", pktService(pktEndpoints[1:3], false, true, 0))
	if _, err := l.ask("tcp", nodeTCP, 500*time.Millisecond); !isTimeout(err) {
		t.Errorf("externalTrafficPolicy Local without a local endpoint: %v, want the SYN dropped (a timeout)", err)
	}
	expect("cluster traffic still spread", check{"tcp", clusterTCP, epNames(pktEndpoints[1:3]...), pktClientIP})

	affinity(t, l, clusterTCP, clusterUDP, nodeTCP)

	l.sync(t, "no endpoints", pktService(nil, false, false, 0))
	for _, c := range []check{{"tcp", clusterTCP, nil, ""}, {"udp", clusterUDP, nil, ""}, {"tcp", nodeTCP, nil, ""}, {"udp", nodeUDP, nil, ""}} {
		start := time.Now()
		if _, err := l.ask(c.network, c.target, 2*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("no endpoints: %s %s gave %v, want connection refused", c.network, c.target, err)
		}
		if elapsed := time.Since(start); elapsed > time.Second {
			t.Errorf("no endpoints: refusal of %s %s took %v", c.network, c.target, elapsed)
		}
	}

	l.sync(t, "back", pktService(pktEndpoints[2:], false, false, 0))
	expect("endpoints back", check{"udp", clusterUDP, epNames(pktEndpoints[2:]...), pktClientIP})
}

// affinity checks ClientIP affinity: a client stays on one endpoint, by cluster IP and NodePort
// alike; when that endpoint goes it is sent elsewhere, and stays there; a Local NodePort keeps
// it on this node's endpoints.
func affinity(t *testing.T, l *packetLab, clusterTCP, clusterUDP, nodeTCP string) {
	t.Helper()
	sticky := func(step, network, target string, among []string) string {
		t.Helper()
		got, _ := l.landings(t, network, target, 20)
		if len(got) != 1 || !slices.Contains(among, got[0]) {
			t.Errorf("%s: %s %s landed on %v, want one endpoint of %v", step, network, target, got, among)
			return ""
		}
		return got[0]
	}
	l.sync(t, "affinity", pktService(pktEndpoints, false, false, time.Minute))
	all := epNames(pktEndpoints...)
	first := sticky("ClientIP affinity", "tcp", clusterTCP, all)
	sticky("ClientIP affinity", "udp", clusterUDP, all)
	if got := sticky("ClientIP affinity", "tcp", nodeTCP, all); got != first {
		t.Errorf("ClientIP affinity: the NodePort sent the client to %s, the cluster IP to %s", got, first)
	}

	var rest []pktEndpoint
	for _, ep := range pktEndpoints {
		if ep.name != first {
			rest = append(rest, ep)
		}
	}
	l.sync(t, "affinity, endpoint gone", pktService(rest, false, false, time.Minute))
	sticky("ClientIP affinity after its endpoint went", "tcp", clusterTCP, epNames(rest...))

	l.sync(t, "affinity, Local NodePort", pktService(pktEndpoints, false, true, time.Minute))
	sticky("ClientIP affinity through a Local NodePort", "tcp", nodeTCP, epNames(pktEndpoints[0], pktEndpoints[3]))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}
