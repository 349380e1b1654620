package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/nftext"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

func dispatchEndpoints(n int) []Endpoint {
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 8080)}
	}
	return eps
}

// TestDispatchIsOneLookup checks that however many endpoints a port has, a new connection
// evaluates one rule: numgen over exactly N values, each index mapping to a distinct
// endpoint, so each endpoint gets 1/N of new connections.
func TestDispatchIsOneLookup(t *testing.T) {
	port := Port{Name: "http", Protocol: TCP, Port: 80}
	for _, affinity := range []time.Duration{0, time.Minute} {
		svc := &Service{Namespace: "ns", Name: "svc", AffinityTimeout: affinity, ClusterIPs: ips("10.96.0.1")}
		for _, n := range []int{2, 3, 10, 17, 300} {
			p := port
			p.Endpoints = dispatchEndpoints(n)
			svc.Ports = []Port{p}
			objs := renderService(svc, ipv4)
			var rules []string
			mapName, keyPrefix, want := "cluster-endpoints-tcp", "10.96.0.1 . 80 . ",
				fmt.Sprintf("meta l4proto tcp dnat ip addr . port to ip daddr . tcp dport . numgen random mod %d map @cluster-endpoints-tcp", n)
			if len(objs.picks) != 1 || objs.picks[0].name != pickChainName(pickCluster, TCP, n) {
				t.Fatalf("n=%d: picks %+v", n, objs.picks)
			}
			for _, r := range objs.picks[0].rules { // the masquerade is cluster-dispatch's, before the pick
				rules = append(rules, nftext.Rule(ruleset.IPv4, r))
			}
			if len(rules) != 1 {
				t.Fatalf("n=%d: %d rules, want 1", n, len(rules))
			}
			if affinity > 0 {
				// A known client is one lookup too, in the port's own map, before the pick.
				if len(objs.chains) != 1 || len(objs.affinity) != 1 {
					t.Fatalf("affinity n=%d: chains %+v, affinity maps %+v", n, objs.chains, objs.affinity)
				}
				wantSvc := []string{"jump " + chainClusterMasq, nftext.Rule(ruleset.IPv4, knownClientRule(objs.affinity[0])),
					"goto " + pickChainName(pickCluster, TCP, n)}
				var got []string
				for _, r := range objs.chains[0].rules {
					got = append(got, nftext.Rule(ruleset.IPv4, r))
				}
				if !slices.Equal(got, wantSvc) {
					t.Fatalf("affinity n=%d: service chain %q, want %q", n, got, wantSvc)
				}
			} else if len(objs.chains) != 0 {
				t.Fatalf("n=%d: chains %+v", n, objs.chains)
			}
			if pick := rules[len(rules)-1]; pick != want {
				t.Fatalf("n=%d: rule %q, want %q", n, pick, want)
			}
			seen := map[string]bool{}
			i := 0
			for _, e := range objs.entries {
				if e.mapName != mapName {
					continue
				}
				el := nftext.Object(ruleset.IPv4, e.element()).(*knftables.Element)
				if got := strings.Join(el.Key, " . "); got != keyPrefix+fmt.Sprint(i) {
					t.Fatalf("n=%d: element %d has key %q", n, i, got)
				}
				target := fmt.Sprintf("%s . 8080", p.Endpoints[i].Addr.Addr())
				if el.Value[0] != target || seen[el.Value[0]] {
					t.Fatalf("n=%d: element %d = %q, want %q once", n, i, el.Value, target)
				}
				seen[el.Value[0]] = true
				i++
			}
			if i != n {
				t.Fatalf("n=%d: %d map elements", n, i)
			}
		}
	}
}

// TestServicesSharePickChains checks that a port without affinity adds no chain, rule or set of
// its own: Services with the same number of endpoints share one pick chain, which a full sync
// writes once.
func TestServicesSharePickChains(t *testing.T) {
	services := []Service{
		tcpService("ns", "a", "10.96.0.1", 80, "10.244.0.1:80"),
		tcpService("ns", "b", "10.96.0.2", 80, "10.244.0.2:80"),
		tcpService("ns", "c", "10.96.0.3", 80, "10.244.0.3:80", "10.244.0.4:80"),
	}
	dump, _, err := Render(context.Background(), services, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base, _, _ := Render(context.Background(), nil, Options{})
	if got := count(dump, "add chain ") - count(base, "add chain "); got != 2 {
		t.Errorf("%d chains beyond the base, want 2 (pick-cluster-tcp-1 and -2):\n%s", got, dump)
	}
	// Each cluster pick chain has the set of the ports that lead to it, and one dispatch rule.
	if got := count(dump, "add set ") + count(dump, "add map ") - count(base, "add set ") - count(base, "add map "); got != 2 {
		t.Errorf("%d sets or maps beyond the base, want 2 (the pick chains' sets)", got)
	}
	for _, pick := range []string{"pick-cluster-tcp-1", "pick-cluster-tcp-2"} {
		for _, want := range []string{"add set ip fleetslice " + pick + " ", "add rule ip fleetslice " + pick + " ",
			"add rule ip fleetslice " + chainClusterDispatch + " ip daddr . meta l4proto . th dport @" + pick + " goto " + pick} {
			if count(dump, want) != 1 {
				t.Errorf("want 1 line starting %q:\n%s", want, dump)
			}
		}
	}
}

// TestRulesPerServiceNoMoreThanKubeProxy counts what one Service port costs in the table and
// compares it with what kube-proxy v1.37.2's nftables mode writes for the same Service
// (pkg/proxy/nftables/proxier.go): a service chain with a masquerade rule and one endpoint
// rule; an external chain for a NodePort (masquerade, goto); with ClientIP affinity one check
// rule per endpoint in the service chain plus a vmap rule, and a chain of two rules (update,
// dnat) per endpoint. The agent's count does not grow with the endpoints, affinity or not.
func TestRulesPerServiceNoMoreThanKubeProxy(t *testing.T) {
	const n = 10
	endpoints := dispatchEndpoints(n)
	cases := []struct {
		name                  string
		svc                   Service
		kubeChains, kubeRules int
	}{
		{"cluster IP", Service{Ports: []Port{{Name: "p", Protocol: TCP, Port: 80, Endpoints: endpoints}}}, 1, 2},
		{"node port", Service{Ports: []Port{{Name: "p", Protocol: TCP, Port: 80, NodePort: 30080, Endpoints: endpoints}}}, 2, 4},
		{"affinity", Service{AffinityTimeout: time.Minute, Ports: []Port{{Name: "p", Protocol: TCP, Port: 80, Endpoints: endpoints}}},
			1 + n, 2 + n + 2*n},
		// kube-proxy: external chain (4 rules: short-circuit pods, masquerade and short-circuit
		// local traffic, goto) and a local policy chain (1 rule) beside the cluster chain.
		{"external local", Service{Ports: []Port{{Name: "p", Protocol: TCP, Port: 80, NodePort: 30080, ExternalLocal: true,
			Endpoints: endpoints, ExternalEndpoints: endpoints[:3]}}}, 3, 7},
	}
	for _, tc := range cases {
		tc.svc.Namespace, tc.svc.Name, tc.svc.ClusterIPs = "ns", "svc", ips("10.96.0.1")
		base, _, err := Render(context.Background(), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		full, _, err := Render(context.Background(), []Service{tc.svc}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		chains := count(full, "add chain ") - count(base, "add chain ")
		rules := count(full, "add rule ") - count(base, "add rule ")
		t.Logf("%s, %d endpoints: %d chains, %d rules (kube-proxy %d, %d)", tc.name, n, chains, rules, tc.kubeChains, tc.kubeRules)
		if chains > tc.kubeChains || rules > tc.kubeRules {
			t.Errorf("%s: %d chains and %d rules, kube-proxy writes %d and %d", tc.name, chains, rules, tc.kubeChains, tc.kubeRules)
		}
		if strings.Contains(full, "numgen random mod 10 ==") {
			t.Errorf("%s: a rule per endpoint:\n%s", tc.name, full)
		}
		more := tc.svc
		more.Ports = []Port{more.Ports[0]}
		more.Ports[0].Endpoints = dispatchEndpoints(3 * n)
		if more.Ports[0].ExternalLocal {
			more.Ports[0].ExternalEndpoints = more.Ports[0].Endpoints[:3]
		}
		three, _, err := Render(context.Background(), []Service{more}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c, r := count(three, "add chain ")-count(base, "add chain "), count(three, "add rule ")-count(base, "add rule "); c != chains || r != rules {
			t.Errorf("%s: %d chains and %d rules with %d endpoints, %d and %d with %d", tc.name, c, r, 3*n, chains, rules, n)
		}
	}
}

func count(dump, prefix string) int {
	n := 0
	for _, l := range strings.Split(dump, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// A changed endpoint address with the same number of endpoints changes one map element and
// nothing else: the rule, with the same modulus, stays.
func TestEndpointChangeRewritesOneElement(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	svc := tcpService("ns", "web", "10.96.0.1", 80, "10.244.0.1:80", "10.244.0.2:80", "10.244.0.3:80")
	mustSync(t, s, []Service{svc}, true)
	svc.Ports[0].Endpoints = eps("10.244.0.1:80", "10.244.0.2:80", "10.244.0.4:80")
	mustSync(t, s, []Service{svc}, false)
	want := []string{
		"delete element ip fleetslice cluster-endpoints-tcp { 10.96.0.1 . 80 . 2 }",
		"add element ip fleetslice cluster-endpoints-tcp { 10.96.0.1 . 80 . 2 : 10.244.0.4 . 80 }",
	}
	if got := txLines(fake); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("transaction:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := canonicalDump(fake), freshRender(t, []Service{svc}, Options{}); got != want {
		t.Errorf("differs from a fresh render:\n%s", lineDiff(want, got))
	}
}

// recordingBackend keeps the operations of every transaction it is given, and accepts them. It
// cannot read its table back, so its full syncs rebuild.
type recordingBackend struct{ ops []ruleset.Op }

func (r *recordingBackend) apply(_ context.Context, ops, _ []ruleset.Op) error {
	r.ops = append(r.ops, ruleset.Expand(ops)...)
	return nil
}

func (r *recordingBackend) clients(context.Context, string) ([]clientEntry, error) { return nil, nil }

func (r *recordingBackend) read(context.Context) (*tableImage, speller, error) { return nil, nil, nil }

// TestFullSyncWritesEveryChainFirst checks that a full sync creates every Service's chains before
// any Service's maps and rules (see writeServiceChains): with two Services of ClientIP affinity,
// the last chain of the second (and the record chain) come before the first map and rule of the
// first.
func TestFullSyncWritesEveryChainFirst(t *testing.T) {
	var services []Service
	for i, name := range []string{"a", "b"} {
		services = append(services, Service{Namespace: "ns", Name: name, AffinityTimeout: time.Minute,
			ClusterIPs: ips(fmt.Sprintf("10.96.0.%d", i+1)),
			Ports:      []Port{{Name: "p", Protocol: TCP, Port: 80, NodePort: 30080 + uint16(i), Endpoints: dispatchEndpoints(3)}}})
	}
	back := &recordingBackend{}
	s, err := NewWithBackend(back, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(context.Background(), services, true); err != nil {
		t.Fatal(err)
	}
	own := map[string]bool{}
	var maps []string
	for i := range services {
		objs := renderService(&services[i], ipv4)
		for _, c := range objs.chains {
			own[c.name] = true
		}
		maps = append(maps, affinityNames(objs.affinity)...)
	}
	slices.Sort(maps)
	own[recordChainName(maps)] = true // the Services share their endpoints, so one record chain
	lastChain, firstContent, chains := -1, -1, 0
	for i, o := range back.ops {
		switch obj := o.Obj.(type) {
		case *ruleset.Chain:
			if own[obj.Name] {
				lastChain, chains = i, chains+1
			}
		case *ruleset.Rule:
			if own[obj.Chain] && firstContent < 0 {
				firstContent = i
			}
		case *ruleset.Set:
			if firstContent < 0 && (strings.HasPrefix(obj.Name, "aff-") || strings.HasPrefix(obj.Name, "affp-")) {
				firstContent = i
			}
		}
	}
	if chains != 2*(1+1)+1 || firstContent < 0 || lastChain > firstContent {
		t.Fatalf("%d Service chains, the last at operation %d; the first of their sets or rules at %d", chains, lastChain, firstContent)
	}
}
