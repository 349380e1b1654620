package dataplane

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

var driftOpts = Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}

// driftLab is a netlink Syncer in a namespace of its own, programmed with the golden Services.
type driftLab struct {
	t        *testing.T
	ns       *nsThread
	s        *Syncer
	nft      knftables.Interface
	services []Service
	want     string // the table as nft lists it right after the sync
}

// newDriftLab opens a Syncer that checks for drift through backend: "netlink", or "nft"
// (NewKernelNft).
func newDriftLab(t *testing.T, backend string) *driftLab {
	requireKernel(t)
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "drift"))
	s, nft := openBackend(t, ns, "netlink", knftables.IPv4Family, driftOpts)
	if backend == "nft" {
		var err error
		ns.do(func() {
			s, err = NewKernelNft(nft, Options{Family: knftables.IPv4Family, PodCIDRs: driftOpts.PodCIDRs})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	l := &driftLab{t: t, ns: ns, s: s, nft: nft, services: goldenServices()}
	l.sync(true)
	return l
}

func (l *driftLab) sync(full bool) Stats {
	l.t.Helper()
	var st Stats
	var err error
	l.ns.do(func() {
		if st, err = l.s.Sync(context.Background(), l.services, full); err == nil {
			l.want, err = describeTable(context.Background(), l.nft)
		}
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return st
}

// settle waits until the chains a sync left flushed can go, and deletes them with a sync of no
// changes, as the agent does at Stats.CleanupAt.
func (l *driftLab) settle(st Stats) {
	l.t.Helper()
	if st.CleanupAt.IsZero() {
		return
	}
	time.Sleep(time.Until(st.CleanupAt))
	var err error
	l.ns.do(func() {
		if _, err = l.s.SyncChanges(context.Background(), nil, nil); err == nil {
			l.want, err = describeTable(context.Background(), l.nft)
		}
	})
	if err != nil {
		l.t.Fatal(err)
	}
}

func (l *driftLab) check() DriftCheck {
	l.t.Helper()
	var res DriftCheck
	var err error
	l.ns.do(func() { res, err = l.s.CheckDrift(context.Background()) })
	if err != nil {
		l.t.Fatal(err)
	}
	return res
}

func (l *driftLab) nftCmd(args ...string) string {
	l.t.Helper()
	var out string
	l.ns.do(func() { out = run(l.t, append([]string{"nft"}, args...)...) })
	return out
}

// TestKernelNoDriftWhenOnlyTheAgentWrites would fail if the agent's own writes, full or
// incremental, or writes to other tables counted as drift.
func TestKernelNoDriftWhenOnlyTheAgentWrites(t *testing.T) {
	for _, backend := range kernelBackends {
		t.Run(backend, func(t *testing.T) { noDriftWhenOnlyTheAgentWrites(t, newDriftLab(t, backend)) })
	}
}

func noDriftWhenOnlyTheAgentWrites(t *testing.T, l *driftLab) {
	if res := l.check(); res.Drift != nil || res.Listed {
		t.Fatalf("right after a full sync: %+v, want no drift and no listing", res)
	}
	l.services[1].Ports[0].Endpoints = eps("10.244.2.7:8080", "10.244.3.1:8080", "10.244.3.2:8080")
	l.services = l.services[:len(l.services)-1]
	if st := l.sync(false); st.Full || st.Changed == 0 {
		t.Fatalf("want an incremental sync that changed something: %+v", st)
	}
	if res := l.check(); res.Drift != nil || res.Listed {
		t.Fatalf("after an incremental sync: %+v, want no drift and no listing", res)
	}
	// Another program's table changes the ruleset generation, not the agent's table: the
	// check reads the table once, finds it intact, and skips the listing again afterwards.
	l.nftCmd("add", "table", "ip", "someone-else")
	l.nftCmd("add", "chain", "ip", "someone-else", "c")
	if res := l.check(); res.Drift != nil || !res.Listed {
		t.Fatalf("after a write to another table: %+v, want a listing and no drift", res)
	}
	if res := l.check(); res.Drift != nil || res.Listed {
		t.Fatalf("second check: %+v, want no listing", res)
	}
}

// TestKernelDriftAroundTheAgentsOwnCommitIsFound would fail if a change another program
// commits right before or right after one of the agent's incremental writes passed for the
// agent's own and went unnoticed by every later check: the generation after the agent's write
// then says nothing of who else wrote.
func TestKernelDriftAroundTheAgentsOwnCommitIsFound(t *testing.T) {
	for _, backend := range kernelBackends {
		for _, when := range []string{"before", "after"} {
			t.Run(backend+"/"+when, func(t *testing.T) {
				l := newDriftLab(t, backend)
				if res := l.check(); res.Drift != nil {
					t.Fatalf("right after the first sync: %+v", res)
				}
				intruder := func() { run(t, "nft", "add", "chain", "ip", TableName, "intruder") } // on the namespace's thread already
				if when == "before" {
					l.ns.do(intruder)
				} else {
					setCommitHook(t, l.s, intruder)
				}
				l.services[1].Ports[0].Endpoints = eps("10.244.2.7:8080", "10.244.3.1:8080")
				if st := l.sync(false); st.Full || st.Operations == 0 {
					t.Fatalf("want an incremental sync that wrote something: %+v", st)
				}
				res := l.check()
				if res.Drift == nil || res.Drift.Kind != DriftContentChanged || !strings.Contains(res.Drift.Detail, "intruder") {
					t.Fatalf("after a chain added right %s the agent's write: %+v, want the intruder found", when, res)
				}
			})
		}
	}
}

// setCommitHook makes s's kernel backend run hook right after each of its transactions commits.
func setCommitHook(t *testing.T, s *Syncer, hook func()) {
	k, ok := s.back.(keepsGenerations)
	if !ok {
		t.Fatalf("backend %T has no commit hook", s.back)
	}
	k.generations().hook = hook
}

// TestKernelNoDriftOverRandomIncrementalSyncs replays random changes (endpoints, affinity,
// NodePorts, ports, clashes) as incremental syncs, with stale chains deleted later, and checks
// after each, with the table read back every time, that the model of the table the drift check
// keeps matches what the kernel holds.
func TestKernelNoDriftOverRandomIncrementalSyncs(t *testing.T) {
	requireKernel(t)
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "driftseq"))
	clock := &fakeClock{now: time.Unix(0, 0)}
	opts := driftOpts
	opts.Clock = clock.Now
	s, _ := openBackend(t, ns, "netlink", knftables.IPv4Family, opts)
	world, present := initialWorld(6)
	rng := rand.New(rand.NewPCG(13, 13))
	ctx := context.Background()
	for step := range 60 {
		mutate(world, present, byte(rng.UintN(256)), byte(rng.UintN(256)))
		var res DriftCheck
		var err error
		ns.do(func() {
			if _, err = s.Sync(ctx, snapshot(world, present), step == 0); err == nil {
				s.back.(*netlinkBackend).gens.forget() // as if another table had changed
				res, err = s.CheckDrift(ctx)
			}
		})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if res.Drift != nil || !res.Listed {
			t.Fatalf("step %d: %+v (%v), want a listing and no drift", step, res, res.Drift)
		}
		clock.Advance(time.Duration(rng.UintN(3)) * time.Second)
	}
}

var (
	handleRE = regexp.MustCompile(`# handle (\d+)`)
	// endpointElementRE finds a cluster endpoint map's element in nft's listing: its key, and
	// its endpoint's port.
	endpointElementRE = regexp.MustCompile(`([0-9.]+ \. \d+ \. (?:0x)?[0-9a-f]+) : [0-9.]+ \. (\d+)`)
)

// TestKernelDriftIsFoundAndRepaired edits the table by hand in several ways; each is found by
// one check, and the next sync, even one asked to be incremental, restores the table.
func TestKernelDriftIsFoundAndRepaired(t *testing.T) {
	for _, backend := range kernelBackends {
		t.Run(backend, func(t *testing.T) { driftIsFoundAndRepaired(t, newDriftLab(t, backend), backend) })
	}
}

func driftIsFoundAndRepaired(t *testing.T, l *driftLab, backend string) {
	pickChain := renderService(&l.services[1], ipv4).picks[0].name
	cases := []struct {
		name, kind string
		edit       func()
	}{
		{"table deleted", DriftTableMissing, func() { l.nftCmd("delete", "table", "ip", TableName) }},
		{"chain flushed", DriftContentChanged, func() { l.nftCmd("flush", "chain", "ip", TableName, pickChain) }},
		{"rule edited", DriftContentChanged, func() {
			listing := l.nftCmd("-a", "list", "chain", "ip", TableName, chainServices)
			m := handleRE.FindAllStringSubmatch(listing, -1)
			if len(m) == 0 {
				t.Fatalf("no rule handle in:\n%s", listing)
			}
			l.nftCmd("replace", "rule", "ip", TableName, chainServices, "handle", m[len(m)-1][1], "drop")
		}},
		// The same number of elements, one of them different: found by the sets' digests.
		{"endpoint replaced", DriftContentChanged, func() {
			const m = "cluster-endpoints-tcp"
			listing := l.nftCmd("list", "map", "ip", TableName, m)
			el := endpointElementRE.FindStringSubmatch(listing)
			if el == nil {
				t.Fatalf("no element in map %s:\n%s", m, listing)
			}
			l.nftCmd("delete", "element", "ip", TableName, m, "{ "+el[1]+" }")
			l.nftCmd("add", "element", "ip", TableName, m, "{ "+el[1]+" : 192.0.2.77 . "+el[2]+" }")
		}},
		{"chain added", DriftContentChanged, func() { l.nftCmd("add", "chain", "ip", TableName, "intruder") }},
		{"rule added", DriftContentChanged, func() { l.nftCmd("insert", "rule", "ip", TableName, chainServices, "accept") }},
		{"set element added", DriftContentChanged, func() {
			l.nftCmd("add", "element", "ip", TableName, setPodCIDRs, "{ 192.0.2.0/24 }")
		}},
		{"cluster port deleted", DriftContentChanged, func() {
			l.nftCmd("delete", "element", "ip", TableName, setClusterPorts, "{ 10.96.0.10 . tcp . 80 }")
		}},
	}
	for _, tc := range cases {
		if backend == "nft" && (tc.name == "rule edited" || tc.name == "endpoint replaced") {
			continue // the nft backend compares structure and counts, not contents
		}
		before := l.want
		tc.edit()
		res := l.check()
		if res.Drift == nil || res.Drift.Kind != tc.kind {
			t.Fatalf("%s: check found %+v, want kind %s", tc.name, res.Drift, tc.kind)
		}
		t.Logf("%s: %s", tc.name, res.Drift.Detail)
		st := l.sync(false)
		if rebuild := tc.kind == DriftTableMissing; !st.Full || (st.Rebuilt != "") != rebuild {
			t.Fatalf("%s: the sync after drift: %+v, want a full sync that rebuilds the table only when it is gone", tc.name, st)
		}
		t.Logf("%s: repaired with %d operations", tc.name, st.Operations)
		l.settle(st)
		if l.want != before {
			t.Fatalf("%s: not repaired:\n%s", tc.name, lineDiff(before, l.want))
		}
		if res := l.check(); res.Drift != nil || res.Listed {
			t.Fatalf("%s: after the repair: %+v, want no drift and no listing", tc.name, res)
		}
	}
}

func TestCheckDriftNeedsANetlinkBackend(t *testing.T) {
	s, _, _ := newFakeSyncer(t, Options{})
	mustSync(t, s, goldenServices(), true)
	if _, err := s.CheckDrift(context.Background()); err != ErrDriftUnsupported {
		t.Fatalf("CheckDrift on the fake: %v, want ErrDriftUnsupported", err)
	}
	if !strings.Contains(ErrDriftUnsupported.Error(), "drift") {
		t.Fatal(ErrDriftUnsupported)
	}
}

// BenchmarkKernelDriftCheck5000x10 measures a drift check of a 5,000-Service table of 10
// endpoints each: "unchanged" when the ruleset generation has not moved, "listed" when it has
// and the table is read back and compared.
func BenchmarkKernelDriftCheck5000x10(b *testing.B) {
	requireKernel(b)
	ns := enterNetns(b, newNetns(b, uniquePrefix(b), "driftbench"))
	s, _ := openBackend(b, ns, "netlink", knftables.IPv4Family, Options{})
	services := scaleServices(benchServices, benchEndpoints)
	var err error
	ns.do(func() { _, err = s.Sync(context.Background(), services, true) })
	if err != nil {
		b.Fatal(err)
	}
	for _, listed := range []bool{false, true} {
		name := "unchanged"
		if listed {
			name = "listed"
		}
		b.Run(name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				var res DriftCheck
				before := cpuTime()
				ns.do(func() {
					if listed {
						s.back.(*netlinkBackend).gens.forget()
					}
					res, err = s.CheckDrift(context.Background())
				})
				cpu += cpuTime() - before
				if err != nil || res.Drift != nil || res.Listed != listed {
					b.Fatalf("%+v %v %v", res, res.Drift, err)
				}
			}
			b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}

// TestKernelNoDriftInEitherFamily reads back tables of every rendered shape (affinity,
// externalTrafficPolicy Local, SCTP, NodePorts, Services without endpoints) in both families
// and finds them equal to what was written.
func TestKernelNoDriftInEitherFamily(t *testing.T) {
	requireKernel(t)
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "driftfam"))
	v6 := []Service{maxLengthService(knftables.IPv6Family),
		{Namespace: "six", Name: "web", ClusterIPs: ips("fd00:96::20"), Ports: []Port{
			{Name: "http", Protocol: TCP, Port: 80, NodePort: 30080, Endpoints: eps("[fd00:244::7]:8080", "[fd00:244::8]:8080")},
			{Name: "dns", Protocol: UDP, Port: 53, Endpoints: eps("[fd00:244::7]:53")},
		}},
		{Namespace: "six", Name: "gone", ClusterIPs: ips("fd00:96::40"), Ports: []Port{{Name: "x", Protocol: TCP, Port: 1, NodePort: 30001}}},
	}
	cases := []struct {
		family   knftables.Family
		services []Service
		cidr     string
	}{
		{knftables.IPv4Family, append(goldenServices(), maxLengthService(knftables.IPv4Family)), "10.244.0.0/16"},
		{knftables.IPv6Family, v6, "fd00:244::/48"},
	}
	for _, tc := range cases {
		s, _ := openBackend(t, ns, "netlink", tc.family, Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix(tc.cidr)}})
		var res DriftCheck
		var err error
		ns.do(func() {
			if _, err = s.Sync(context.Background(), tc.services, true); err == nil {
				s.back.(*netlinkBackend).gens.forget()
				res, err = s.CheckDrift(context.Background())
			}
		})
		if err != nil || res.Drift != nil || !res.Listed {
			t.Errorf("%s: %+v %v, %v; want a listing and no drift", tc.family, res, res.Drift, err)
		}
	}
}
