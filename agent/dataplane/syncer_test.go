package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

func manyServices(n int) []Service {
	out := make([]Service, n)
	for i := range out {
		out[i] = tcpService("ns", fmt.Sprintf("s%02d", i), fmt.Sprintf("10.96.1.%d", i+1), 80,
			fmt.Sprintf("10.244.1.%d:8080", i+1), fmt.Sprintf("10.244.2.%d:8080", i+1))
	}
	return out
}

// txLines returns the commands of the fake's last transaction.
func txLines(fake *knftables.Fake) []string {
	return strings.Split(strings.TrimSpace(fake.LastTransaction.String()), "\n")
}

func TestIncrementalSyncTouchesOnlyTheChangedService(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	services := manyServices(30)
	mustSync(t, s, services, false) // the first sync is always full
	services[7].Ports[0].Endpoints = eps("10.244.1.8:8080", "10.244.3.8:8080", "10.244.4.8:8080")

	st := mustSync(t, s, services, false)
	if st.Full || st.Changed != 1 || st.Removed != 0 || st.Services != 30 {
		t.Fatalf("stats = %+v", st)
	}
	// Three endpoints instead of two: the port moves to the set of the shared pick chain for
	// three, which this sync creates with its dispatch rule, and two of its map elements
	// change. Its cluster-ports element stays.
	want := []string{
		"delete element ip fleetslice pick-cluster-tcp-2 { 10.96.1.8 . tcp . 80 }",
		"delete element ip fleetslice cluster-endpoints-tcp { 10.96.1.8 . 80 . 1 }",
		"add set ip fleetslice pick-cluster-tcp-3 { type ipv4_addr . inet_proto . inet_service ; }",
		"add chain ip fleetslice pick-cluster-tcp-3",
		"add rule ip fleetslice pick-cluster-tcp-3 meta l4proto tcp dnat ip addr . port to ip daddr . tcp dport . numgen random mod 3 map @cluster-endpoints-tcp",
		"flush chain ip fleetslice cluster-dispatch",
		"add rule ip fleetslice cluster-dispatch jump cluster-masquerade",
		"add rule ip fleetslice cluster-dispatch ip daddr . meta l4proto . th dport @pick-cluster-tcp-2 goto pick-cluster-tcp-2",
		"add rule ip fleetslice cluster-dispatch ip daddr . meta l4proto . th dport @pick-cluster-tcp-3 goto pick-cluster-tcp-3",
		"add element ip fleetslice pick-cluster-tcp-3 { 10.96.1.8 . tcp . 80 }",
		"add element ip fleetslice cluster-endpoints-tcp { 10.96.1.8 . 80 . 1 : 10.244.3.8 . 8080 }",
		"add element ip fleetslice cluster-endpoints-tcp { 10.96.1.8 . 80 . 2 : 10.244.4.8 . 8080 }",
	}
	if got := txLines(fake); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("transaction:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.Operations != len(want) {
		t.Errorf("operations = %d, want %d", st.Operations, len(want))
	}
	if got, want := canonicalDump(fake), freshRender(t, services, Options{}); got != want {
		t.Errorf("incremental result differs from a fresh render:\n%s", lineDiff(want, got))
	}
}

func TestUnchangedSyncRunsNothing(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	services := manyServices(5)
	mustSync(t, s, services, true)
	last := fake.LastTransaction
	// Reordering endpoints and ports is not a change.
	services[2].Ports[0].Endpoints[0], services[2].Ports[0].Endpoints[1] = services[2].Ports[0].Endpoints[1], services[2].Ports[0].Endpoints[0]
	st := mustSync(t, s, services, false)
	if st.Operations != 0 || st.Changed != 0 || fake.LastTransaction != last {
		t.Errorf("no-op sync ran a transaction: %+v", st)
	}
}

func TestRemovalDeletesElementsAndLaterTheChains(t *testing.T) {
	s, fake, clock := newFakeSyncer(t, Options{StaleChainDelay: time.Second})
	services := manyServices(3)
	services[1].AffinityTimeout = time.Minute
	services[1].Ports[0].NodePort = 30001
	mustSync(t, s, services, true)
	gone := services[1]
	p := gone.Ports[0]
	svcChain, extChain := serviceChainName(&gone, p), externalChainName(&gone, p)
	clients := affinityMapName(&gone, p, false)
	record := recordChainName([]string{clients})

	st := mustSync(t, s, []Service{services[0], services[2]}, false)
	if st.Removed != 1 || st.Changed != 0 {
		t.Fatalf("stats = %+v", st)
	}
	tbl := fake.Table
	if tbl.Maps[mapServiceIPs].FindElement("10.96.1.2", "tcp", "80") != nil {
		t.Error("cluster IP element still present")
	}
	if tbl.Maps[mapServiceNodePorts].FindElement("tcp", "30001") != nil {
		t.Error("node port element still present")
	}
	if tbl.Maps[clients] != nil || tbl.Maps[affinityPortMapName(&gone, p, false)] != nil {
		t.Error("affinity maps still present")
	}
	for _, ep := range p.Endpoints {
		if tbl.Maps[mapAffinityEndpoints].FindElement(ep.Addr.Addr().String(), "tcp", fmt.Sprint(ep.Addr.Port())) != nil {
			t.Errorf("record element of %v still present", ep.Addr)
		}
	}
	for _, name := range []string{svcChain, extChain, record} {
		c := tbl.Chains[name]
		if c == nil || len(c.Rules) != 0 {
			t.Errorf("chain %s should be kept empty until the stale delay passes, got %+v", name, c)
		}
	}

	clock.Advance(500 * time.Millisecond)
	if st := mustSync(t, s, []Service{services[0], services[2]}, false); st.Operations != 0 {
		t.Errorf("chains deleted before the delay: %+v", st)
	}
	clock.Advance(time.Second)
	mustSync(t, s, []Service{services[0], services[2]}, false)
	for _, name := range []string{svcChain, extChain} {
		if fake.Table.Chains[name] != nil {
			t.Errorf("stale chain %s not deleted", name)
		}
	}
	if got, want := canonicalDump(fake), freshRender(t, []Service{services[0], services[2]}, Options{}); got != want {
		t.Errorf("after removal:\n%s", lineDiff(want, got))
	}
}

func TestServiceReturningBeforeItsChainsAreDeleted(t *testing.T) {
	s, fake, clock := newFakeSyncer(t, Options{})
	services := manyServices(2)
	mustSync(t, s, services, true)
	mustSync(t, s, services[:1], false)
	clock.Advance(time.Hour)
	mustSync(t, s, services, false) // the chain is wanted again: flush and refill, not delete
	if got, want := canonicalDump(fake), freshRender(t, services, Options{}); got != want {
		t.Errorf("diff:\n%s", lineDiff(want, got))
	}
	if len(s.state.staleChains) != 0 {
		t.Errorf("stale chains left: %v", s.state.staleChains)
	}
}

func TestEndpointsGoingAwayTurnIntoReject(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	svc := tcpService("ns", "web", "10.96.0.1", 80, "10.244.0.1:80")
	svc.Ports[0].NodePort = 30080
	mustSync(t, s, []Service{svc}, true)
	svc.Ports[0].Endpoints = nil
	mustSync(t, s, []Service{svc}, false)
	tbl := fake.Table
	if tbl.Sets[setNoEndpointIPs].FindElement("10.96.0.1", "tcp", "80") == nil {
		t.Error("no reject element for the cluster IP")
	}
	if tbl.Sets[setNoEndpointPorts].FindElement("tcp", "30080") == nil {
		t.Error("no reject element for the node port")
	}
	if tbl.Maps[mapServiceIPs].FindElement("10.96.0.1", "tcp", "80") != nil {
		t.Error("service element left behind")
	}
	svc.Ports[0].Endpoints = eps("10.244.0.2:80")
	mustSync(t, s, []Service{svc}, false)
	if got, want := canonicalDump(fake), freshRender(t, []Service{svc}, Options{}); got != want {
		t.Errorf("diff:\n%s", lineDiff(want, got))
	}
}

func TestFailedSyncLeavesMemoryAndTableUntouched(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	nft := &failingNFT{Interface: fake}
	s, err := New(nft, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	services := manyServices(4)
	if _, err := s.Sync(ctx, services, false); err != nil {
		t.Fatal(err)
	}
	before := fake.Dump()

	changed := manyServices(4)
	changed[1].Ports[0].Endpoints = eps("10.244.9.9:80")
	nft.failNext = true
	st, err := s.Sync(ctx, changed, false)
	if !errors.Is(err, errKernelRefused) || !strings.Contains(err.Error(), "table left as it was") {
		t.Fatalf("err = %v", err)
	}
	if st.Full || st.Changed != 1 {
		t.Errorf("failed stats = %+v", st)
	}
	if fake.Dump() != before {
		t.Error("a failed transaction changed the table")
	}
	if rec := s.state.written["ns/s01"]; rec.fingerprint == fingerprint(&changed[1]) || rec.raw == s.scratch.hasher.digest(&changed[1]) {
		t.Error("memory recorded the change that failed")
	}

	st, err = s.Sync(ctx, changed, false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full {
		t.Error("the sync after a failure must rebuild the table")
	}
	if got, want := canonicalDump(fake), freshRender(t, changed, Options{}); got != want {
		t.Errorf("diff:\n%s", lineDiff(want, got))
	}
	if st, _ := s.Sync(ctx, changed, false); st.Full || st.Operations != 0 {
		t.Errorf("recovered syncer still rebuilding: %+v", st)
	}
}

func TestFullSyncRepairsDrift(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	services := manyServices(3)
	mustSync(t, s, services, true)
	tx := fake.NewTransaction()
	tx.Delete(&knftables.Element{Set: setClusterPorts, Key: []string{"10.96.1.1", "tcp", "80"}})
	tx.Add(&knftables.Chain{Name: "intruder"})
	tx.Add(&knftables.Rule{Chain: "intruder", Rule: "drop"})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	st := mustSync(t, s, services, true)
	if !st.Full || st.Changed != 3 {
		t.Errorf("stats = %+v", st)
	}
	if got, want := canonicalDump(fake), freshRender(t, services, Options{}); got != want {
		t.Errorf("drift not repaired:\n%s", lineDiff(want, got))
	}
}

func TestInvalidAndConflictingServicesAreRejected(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	good := tcpService("a", "first", "10.96.0.1", 80, "10.244.0.1:80")
	good.Ports[0].NodePort = 30000
	clash := tcpService("b", "second", "10.96.0.1", 80, "10.244.0.2:80")
	nodePortClash := tcpService("c", "third", "10.96.0.3", 80, "10.244.0.3:80")
	nodePortClash.Ports[0].NodePort = 30000
	invalid := []Service{
		{Name: "nameless-namespace", ClusterIPs: ips("10.96.0.9")},
		{Namespace: "x", Name: "proto", ClusterIPs: ips("10.96.0.9"), Ports: []Port{{Protocol: "icmp", Port: 1}}},
		{Namespace: "x", Name: "port0", ClusterIPs: ips("10.96.0.9"), Ports: []Port{{Protocol: TCP}}},
		{Namespace: "x", Name: "dup", ClusterIPs: ips("10.96.0.9"), Ports: []Port{{Protocol: TCP, Port: 1}, {Protocol: TCP, Port: 2}}},
		{Namespace: "x", Name: "samenumber", ClusterIPs: ips("10.96.0.9"), Ports: []Port{{Name: "a", Protocol: TCP, Port: 1}, {Name: "b", Protocol: TCP, Port: 1}}},
		{Namespace: "x", Name: "samenodeport", ClusterIPs: ips("10.96.0.9"), Ports: []Port{
			{Name: "a", Protocol: TCP, Port: 1, NodePort: 30009}, {Name: "b", Protocol: TCP, Port: 2, NodePort: 30009}}},
		{Namespace: "x", Name: "badip", ClusterIPs: []netip.Addr{{}}},
		{Namespace: "x", Name: "badep", ClusterIPs: ips("10.96.0.9"), Ports: []Port{{Protocol: TCP, Port: 1, Endpoints: []Endpoint{{}}}}},
		{Namespace: "x", Name: "affinity", ClusterIPs: ips("10.96.0.9"), AffinityTimeout: 1500 * time.Millisecond},
	}
	all := append([]Service{clash, good, nodePortClash, good}, invalid...)
	st := mustSync(t, s, all, true)
	if st.Services != 1 {
		t.Errorf("services = %d, want 1", st.Services)
	}
	reasons := map[string]string{}
	for _, r := range st.Rejected {
		reasons[r.Service] = r.Reason
	}
	if len(reasons) != 3+len(invalid) { // b, c and the duplicate of a
		t.Errorf("rejections = %v", st.Rejected)
	}
	if !strings.Contains(reasons["b/second"], "already used by a/first") ||
		!strings.Contains(reasons["c/third"], "node port tcp/30000 is already used by a/first") ||
		!strings.Contains(reasons["a/first"], "duplicate") {
		t.Errorf("reasons = %v", reasons)
	}

	// When the winner goes away, the loser takes the address over.
	st = mustSync(t, s, []Service{clash}, false)
	if st.Changed != 1 || st.Removed != 1 {
		t.Errorf("stats = %+v", st)
	}
	if got, want := canonicalDump(fake), freshRender(t, []Service{clash}, Options{}); got != want {
		t.Errorf("diff:\n%s", lineDiff(want, got))
	}
}

func TestSharedHairpinEndpointIsReferenceCounted(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	local := []Endpoint{{Addr: netip.MustParseAddrPort("10.244.0.5:80"), Local: true}}
	a := Service{Namespace: "n", Name: "a", ClusterIPs: ips("10.96.0.1"), Ports: []Port{{Protocol: TCP, Port: 80, Endpoints: local}}}
	b := Service{Namespace: "n", Name: "b", ClusterIPs: ips("10.96.0.2"), Ports: []Port{{Protocol: TCP, Port: 80, Endpoints: local}}}
	key := []string{"10.244.0.5", "10.244.0.5", "tcp", "80"}
	mustSync(t, s, []Service{a, b}, true)
	mustSync(t, s, []Service{b}, false)
	if fake.Table.Sets[setHairpin].FindElement(key...) == nil {
		t.Fatal("hairpin element removed while b still uses it")
	}
	mustSync(t, s, nil, false)
	if fake.Table.Sets[setHairpin].FindElement(key...) != nil {
		t.Fatal("hairpin element left after its last user went away")
	}
	mustSync(t, s, []Service{a}, false)
	if fake.Table.Sets[setHairpin].FindElement(key...) == nil {
		t.Fatal("hairpin element not re-added")
	}
}

func TestAffinityTimeoutChangeReplacesMaps(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	svc := tcpService("n", "sticky", "10.96.0.1", 80, "10.244.0.1:80", "10.244.0.2:80")
	svc.AffinityTimeout = time.Minute
	mustSync(t, s, []Service{svc}, true)
	p := svc.Ports[0]
	oldMap := affinityMapName(&svc, p, false)
	svc.AffinityTimeout = time.Hour
	mustSync(t, s, []Service{svc}, false)
	if fake.Table.Maps[oldMap] != nil {
		t.Error("old affinity map kept")
	}
	newMap := fake.Table.Maps[affinityMapName(&svc, p, false)]
	if newMap == nil || *newMap.Timeout != time.Hour {
		t.Errorf("new affinity map = %+v", newMap)
	}
	svc.AffinityTimeout = 0
	mustSync(t, s, []Service{svc}, false)
	if got, want := canonicalDump(fake), freshRender(t, []Service{svc}, Options{}); got != want {
		t.Errorf("diff:\n%s", lineDiff(want, got))
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	for _, opts := range []Options{
		{Family: knftables.InetFamily},
		{PodCIDRs: []netip.Prefix{{}}},
	} {
		if _, err := New(fake, opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) succeeded")
	}
	if _, err := NewDryRun(Options{Family: knftables.ARPFamily}); err == nil {
		t.Error("NewDryRun(arp) succeeded")
	}
	if _, err := Open(knftables.InetFamily); err == nil {
		t.Error("Open(inet) succeeded")
	}
}

func TestDryRunShowsRulesetAndLastTransaction(t *testing.T) {
	d, err := NewDryRun(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.LastTransaction() != "" {
		t.Error("transaction before any sync")
	}
	ctx := context.Background()
	services := manyServices(2)
	if _, err := d.Sync(ctx, services, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Ruleset(), "10.96.1.2 . tcp . 80") {
		t.Errorf("ruleset:\n%s", d.Ruleset())
	}
	services[0].Ports[0].Endpoints = eps("10.244.7.7:80")
	if _, err := d.Sync(ctx, services, false); err != nil {
		t.Fatal(err)
	}
	if tx := d.LastTransaction(); !strings.Contains(tx, "10.96.1.1 . 80 . 0 : 10.244.7.7 . 80") || strings.Contains(tx, "10.96.1.2") {
		t.Errorf("last transaction:\n%s", tx)
	}
}

func TestOpenExplainsMissingNft(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Open(knftables.IPv4Family)
	if err == nil || !strings.Contains(err.Error(), "nftables unavailable") || !strings.Contains(err.Error(), "nft") {
		t.Errorf("Open without nft: %v", err)
	}
}

// FuzzArbitraryServiceNeverBreaksTheTable feeds unchecked names, protocols,
// addresses and ports: the Syncer must reject or program each Service
// without panicking, and every object name it writes must be short and
// made of characters nft accepts unquoted.
func FuzzArbitraryServiceNeverBreaksTheTable(f *testing.F) {
	f.Add("ns", "name", "http", "tcp", []byte{10, 96, 0, 1, 0, 80, 10, 244, 0, 1, 31, 144}, uint16(30000), int64(60))
	f.Add("", "x", "", "udp", []byte{}, uint16(0), int64(0))
	f.Add("n s;{}", "\"quoted\"", "p/../x", "sctp", []byte{255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0}, uint16(1), int64(-5))
	f.Fuzz(func(t *testing.T, ns, name, portName, proto string, addrs []byte, nodePort uint16, affinity int64) {
		svc := Service{Namespace: ns, Name: name, AffinityTimeout: time.Duration(affinity) * time.Second / 4}
		port := Port{Name: portName, Protocol: Protocol(proto), NodePort: nodePort}
		if len(addrs) >= 6 {
			svc.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte(addrs[0:4]))}
			port.Port = uint16(addrs[4])<<8 | uint16(addrs[5])
			for rest := addrs[6:]; len(rest) >= 6; rest = rest[6:] {
				ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte(rest[0:4])), uint16(rest[4])<<8|uint16(rest[5]))
				port.Endpoints = append(port.Endpoints, Endpoint{Addr: ap, Local: rest[5]%2 == 0})
			}
		}
		svc.Ports = []Port{port}
		nft := &strictNFT{Fake: knftables.NewFake(knftables.IPv4Family, TableName)}
		s, err := New(nft, Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Sync(context.Background(), []Service{svc, tcpService("fixed", "neighbour", "10.96.255.1", 80, "10.244.255.1:80")}, false)
		if err != nil {
			t.Fatalf("sync failed instead of rejecting: %v", err)
		}
		if st.Services+len(st.Rejected) < 1 || st.Services > 2 {
			t.Fatalf("stats = %+v", st)
		}
		for name := range nft.Table.Chains {
			if len(name) > maxObjectNameLength || sanitize(name) != name {
				t.Fatalf("bad chain name %q", name)
			}
		}
		for name := range nft.Table.Sets {
			if len(name) > maxObjectNameLength || sanitize(name) != name {
				t.Fatalf("bad set name %q", name)
			}
		}
		if _, err := s.Sync(context.Background(), nil, false); err != nil {
			t.Fatalf("removing everything: %v", err)
		}
	})
}

// A Service left unchanged still loses its address to a new Service that sorts first, as it
// would in a full sync, and takes it back when that one goes.
func TestKeptServiceLosesAContestToANewcomer(t *testing.T) {
	s, fake, _ := newFakeSyncer(t, Options{})
	old := tcpService("b", "old", "10.96.0.1", 80, "10.244.0.1:80")
	other := tcpService("c", "other", "10.96.0.2", 80, "10.244.0.2:80")
	mustSync(t, s, []Service{old, other}, true)
	newcomer := tcpService("a", "new", "10.96.0.1", 80, "10.244.0.9:80")
	st := mustSync(t, s, []Service{other, old, newcomer}, false)
	if st.Services != 2 || len(st.Rejected) != 1 || st.Rejected[0].Service != "b/old" || st.Removed != 1 || st.Changed != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if got, want := canonicalDump(fake), freshRender(t, []Service{newcomer, other}, Options{}); got != want {
		t.Errorf("after the contest:\n%s", lineDiff(want, got))
	}
	st = mustSync(t, s, []Service{old, other}, false)
	if st.Services != 2 || len(st.Rejected) != 0 || st.Changed != 1 || st.Removed != 1 {
		t.Fatalf("stats after the newcomer left = %+v", st)
	}
	if got, want := canonicalDump(fake), freshRender(t, []Service{old, other}, Options{}); got != want {
		t.Errorf("after the newcomer left:\n%s", lineDiff(want, got))
	}
	if st := mustSync(t, s, []Service{other, old}, false); st.Operations != 0 || st.Services != 2 {
		t.Errorf("unchanged sync: %+v", st)
	}
}

// A sync that retires a chain says when it can go, and a later sync told nothing deletes it, so
// the table ends as a fresh render without waiting for another change.
func TestRetiredChainsGoWithoutAnotherChange(t *testing.T) {
	s, fake, clock := newFakeSyncer(t, Options{})
	services := manyServices(2)
	mustSync(t, s, services, true)
	services[1].Ports[0].Endpoints = eps("10.244.9.1:8080", "10.244.9.2:8080", "10.244.9.3:8080")
	st, err := s.SyncChanges(context.Background(), services[1:], nil)
	if err != nil || !st.CleanupAt.IsZero() {
		t.Fatalf("a new pick chain, none retired: %+v, %v", st, err)
	}
	services[0].Ports[0].Endpoints = services[1].Ports[0].Endpoints
	if st, err = s.SyncChanges(context.Background(), services[:1], nil); err != nil {
		t.Fatal(err)
	}
	if want := clock.Now().Add(time.Second); !st.CleanupAt.Equal(want) {
		t.Fatalf("CleanupAt %v, want %v (pick-cluster-tcp-2 retired)", st.CleanupAt, want)
	}
	clock.Advance(time.Second)
	if st, err = s.SyncChanges(context.Background(), nil, nil); err != nil || st.Operations == 0 || !st.CleanupAt.IsZero() {
		t.Fatalf("cleanup sync: %+v, %v", st, err)
	}
	if got, want := canonicalDump(fake), freshRender(t, services, Options{}); got != want {
		t.Errorf("differs from a fresh render:\n%s", lineDiff(want, got))
	}
}
