package dataplane

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// fullLab is a Syncer on knftables' fake, which a full sync reads back (image.go), programmed
// with the golden Services.
type fullLab struct {
	t        *testing.T
	s        *Syncer
	fake     *knftables.Fake
	clock    *fakeClock
	opts     Options
	services []Service
}

func newFullLab(t *testing.T) *fullLab {
	opts := Options{PodCIDRs: goldenPodCIDRs, StaleChainDelay: time.Second}
	s, fake, clock := newFakeSyncer(t, opts)
	s.scratch.hasher.h.SetSeed(failureSeed)
	l := &fullLab{t: t, s: s, fake: fake, clock: clock, opts: opts, services: goldenServices()}
	if st := mustSync(t, s, l.services, true); st.Rebuilt != "no table" {
		t.Fatalf("the first sync: %+v, want a rebuild of a missing table", st)
	}
	return l
}

// edit changes the fake's table as someone else would.
func (l *fullLab) edit(change func(tx *knftables.Transaction)) {
	l.t.Helper()
	tx := l.fake.NewTransaction()
	change(tx)
	if err := l.fake.Run(context.Background(), tx); err != nil {
		l.t.Fatal(err)
	}
}

// full runs a full sync and returns it with its transaction's lines.
func (l *fullLab) full() (Stats, []string) {
	l.t.Helper()
	before := l.fake.LastTransaction
	st := mustSync(l.t, l.s, l.services, true)
	if l.fake.LastTransaction == before {
		return st, nil
	}
	return st, strings.Split(strings.TrimSpace(l.fake.LastTransaction.String()), "\n")
}

// settle deletes the chains the last sync left flushed, as the agent does at Stats.CleanupAt,
// and checks that the table is then a fresh render.
func (l *fullLab) settle(st Stats) {
	l.t.Helper()
	if !st.CleanupAt.IsZero() {
		l.clock.now = st.CleanupAt
		if _, err := l.s.SyncChanges(context.Background(), nil, nil); err != nil {
			l.t.Fatal(err)
		}
	}
	if got, want := withoutClients(canonicalDump(l.fake)), freshRender(l.t, l.services, l.opts); got != want {
		l.t.Fatalf("the table differs from a fresh render:\n%s", lineDiff(want, got))
	}
	if strings.Contains(l.fake.Dump(), "intruder") {
		l.t.Fatal("an intruder is left")
	}
}

func TestFullSyncOfAnUnchangedTableWritesNothing(t *testing.T) {
	l := newFullLab(t)
	m := renderService(&l.services[2], ipv4).affinity[0]
	recordClient(t, l.fake, m, "10.1.0.1", "10.244.2.8 . 8443")
	st, lines := l.full()
	if st.Operations != 0 || lines != nil || st.Rebuilt != "" || !st.Full || st.Changed != len(l.services) {
		t.Fatalf("a full sync of an unchanged table: %+v\n%s", st, strings.Join(lines, "\n"))
	}
	if got := clientsOf(t, l.fake, m); got["10.1.0.1"] != "10.244.2.8 . 8443" {
		t.Fatalf("the affinity client was lost: %v", got)
	}
	// What the full sync leaves must be what a rebuild leaves, so the next incremental sync
	// works from it (the sticky Service's maps were known, so nothing is due for a second look).
	rebuilt := plannerAfter(t, l.services)
	if !reflect.DeepEqual(l.s.state, rebuilt.state) {
		t.Fatal("the full sync of an unchanged table left another state than a rebuild")
	}
	l.services[0].Ports[0].Endpoints = eps("10.244.7.7:8080")
	if _, err := l.s.SyncChanges(context.Background(), l.services[:1], nil); err != nil {
		t.Fatal(err)
	}
	l.settle(Stats{})
}

// TestFullSyncRepairsEachDrift edits the table behind the Syncer's back, one way at a time, and
// checks that the next full sync writes exactly the repair (or rebuilds, where no difference
// can repair), and that the table is then a fresh render.
func TestFullSyncRepairsEachDrift(t *testing.T) {
	cart := "10.96.0.10 . tcp . 80"
	cases := []struct {
		name    string
		edit    func(tx *knftables.Transaction)
		rebuilt string
		want    []string // the repair's lines; nil: not checked
	}{
		{"element value changed", func(tx *knftables.Transaction) {
			tx.Delete(&knftables.Element{Map: "cluster-endpoints-tcp", Key: []string{"10.96.0.10", "80", "0"}})
			tx.Add(&knftables.Element{Map: "cluster-endpoints-tcp", Key: []string{"10.96.0.10", "80", "0"}, Value: []string{"10.9.9.9 . 1"}})
		}, "", []string{
			"delete element ip fleetslice cluster-endpoints-tcp { 10.96.0.10 . 80 . 0 }",
			"add element ip fleetslice cluster-endpoints-tcp { 10.96.0.10 . 80 . 0 : 10.244.1.5 . 8080 }",
		}},
		{"element deleted", func(tx *knftables.Transaction) {
			tx.Delete(&knftables.Element{Set: "cluster-ports", Key: strings.Split(cart, " . ")})
		}, "", []string{`add element ip fleetslice cluster-ports { ` + cart + ` comment "shop/cart:http" }`}},
		{"element added", func(tx *knftables.Transaction) {
			tx.Add(&knftables.Element{Set: "cluster-ports", Key: []string{"10.96.9.9", "udp", "9"}})
		}, "", []string{"delete element ip fleetslice cluster-ports { 10.96.9.9 . udp . 9 }"}},
		{"comment changed", func(tx *knftables.Transaction) {
			tx.Delete(&knftables.Element{Set: "cluster-ports", Key: strings.Split(cart, " . ")})
			tx.Add(&knftables.Element{Set: "cluster-ports", Key: strings.Split(cart, " . "), Comment: knftables.PtrTo("x/y:z")})
		}, "", []string{
			"delete element ip fleetslice cluster-ports { " + cart + " }",
			`add element ip fleetslice cluster-ports { ` + cart + ` comment "shop/cart:http" }`,
		}},
		{"chain flushed", func(tx *knftables.Transaction) { tx.Flush(&knftables.Chain{Name: chainReject}) }, "", []string{
			"add rule ip fleetslice reject-service meta l4proto tcp reject with tcp reset",
			"add rule ip fleetslice reject-service reject",
		}},
		{"rule added", func(tx *knftables.Transaction) {
			tx.Add(&knftables.Rule{Chain: chainReject, Rule: "accept"})
		}, "", []string{
			"flush chain ip fleetslice reject-service",
			"add rule ip fleetslice reject-service meta l4proto tcp reject with tcp reset",
			"add rule ip fleetslice reject-service reject",
		}},
		{"chain deleted", func(tx *knftables.Transaction) {
			tx.Flush(&knftables.Chain{Name: chainNATOutput})
			tx.Delete(&knftables.Chain{Name: chainNATOutput})
		}, "", []string{
			"add chain ip fleetslice nat-output { type nat hook output priority -100 ; }",
			"add rule ip fleetslice nat-output jump services",
		}},
		{"regular chain added", func(tx *knftables.Transaction) {
			tx.Add(&knftables.Chain{Name: "intruder"})
			tx.Add(&knftables.Rule{Chain: "intruder", Rule: "drop"})
		}, "", []string{"flush chain ip fleetslice intruder"}},
		{"base chain added", func(tx *knftables.Transaction) {
			tx.Add(&knftables.Chain{Name: "intruder", Type: knftables.PtrTo(knftables.FilterType),
				Hook: knftables.PtrTo(knftables.InputHook), Priority: knftables.PtrTo(knftables.FilterPriority)})
		}, "", []string{"delete chain ip fleetslice intruder"}},
		{"set and map added", func(tx *knftables.Transaction) {
			tx.Add(&knftables.Set{Name: "intruder-set", Type: "ipv4_addr"})
			tx.Add(&knftables.Map{Name: "intruder-map", Type: "ipv4_addr : verdict"})
		}, "", []string{"delete map ip fleetslice intruder-map", "delete set ip fleetslice intruder-set"}},
		{"pod CIDR added", func(tx *knftables.Transaction) {
			tx.Add(&knftables.Element{Set: setPodCIDRs, Key: []string{"192.0.2.0/24"}})
		}, "", []string{"flush set ip fleetslice pod-cidrs", "add element ip fleetslice pod-cidrs { 10.244.0.0/16 }"}},
		{"set type changed", func(tx *knftables.Transaction) {
			tx.Delete(&knftables.Set{Name: setHairpin})
			tx.Add(&knftables.Set{Name: setHairpin, Type: "ipv4_addr"})
		}, "set hairpin-endpoints has another type, flags or timeout", nil},
		{"chain hook changed", func(tx *knftables.Transaction) {
			tx.Delete(&knftables.Chain{Name: chainFilterOutput})
			tx.Add(&knftables.Chain{Name: chainFilterOutput, Type: knftables.PtrTo(knftables.FilterType),
				Hook: knftables.PtrTo(knftables.InputHook), Priority: knftables.PtrTo(knftables.FilterPriority)})
		}, "chain filter-output has another type, hook or priority", nil},
		{"table deleted", func(tx *knftables.Transaction) { tx.Delete(&knftables.Table{}) }, "no table", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newFullLab(t)
			l.edit(tc.edit)
			st, lines := l.full()
			if st.Rebuilt != tc.rebuilt {
				t.Fatalf("rebuilt %q, want %q", st.Rebuilt, tc.rebuilt)
			}
			if tc.want != nil && strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("repair:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
			l.settle(st)
			if st, lines := l.full(); st.Operations != 0 {
				t.Fatalf("the full sync after the repair wrote:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// TestFullSyncKeepsStaleChainsUntilTheirDelay: a chain an incremental sync left flushed stays
// through a full sync until its StaleChainDelay is over (kernels before 6.2), then goes.
func TestFullSyncKeepsStaleChainsUntilTheirDelay(t *testing.T) {
	l := newFullLab(t)
	sticky := l.services[2]
	l.services = append(l.services[:2:2], l.services[3:]...)
	st := mustSync(t, l.s, l.services, false)
	if st.CleanupAt.IsZero() {
		t.Fatal("removing an affinity Service left no chain to delete later")
	}
	l.clock.Advance(500 * time.Millisecond)
	st, lines := l.full()
	if strings.Contains(strings.Join(lines, "\n"), "delete chain") || st.CleanupAt.IsZero() {
		t.Fatalf("a full sync before the delay: %+v\n%s", st, strings.Join(lines, "\n"))
	}
	l.clock.Advance(time.Second)
	st, lines = l.full()
	if got := strings.Count(strings.Join(lines, "\n"), "delete chain"); got != len(renderService(&sticky, ipv4).chains)+1 {
		t.Fatalf("a full sync after the delay deleted %d chains:\n%s", got, strings.Join(lines, "\n"))
	}
	l.settle(st)
}

// TestNewSyncerAdoptsTheTable is an agent restart: a new Syncer, which remembers nothing, on a
// programmed table writes only what changed meanwhile, keeps the affinity clients of endpoints
// that stay and forgets those of the endpoint that went (with a second look later), and then
// works incrementally.
func TestNewSyncerAdoptsTheTable(t *testing.T) {
	l := newFullLab(t)
	m := renderService(&l.services[2], ipv4).affinity[0]
	recordClient(t, l.fake, m, "10.1.0.1", "10.244.1.8 . 8443")
	recordClient(t, l.fake, m, "10.1.0.2", "10.244.2.8 . 8443")
	l.services[2].Ports[0].Endpoints = l.services[2].Ports[0].Endpoints[:1] // 10.244.2.8 goes

	s, err := New(l.fake, l.opts)
	if err != nil {
		t.Fatal(err)
	}
	s.pl.opts.Clock = l.clock.Now
	l.s = s
	st, lines := l.full()
	if st.Rebuilt != "" || st.CleanupAt.IsZero() {
		t.Fatalf("the restart's full sync: %+v", st)
	}
	for _, line := range lines {
		if strings.HasPrefix(line, "add chain") || strings.HasPrefix(line, "add map") {
			t.Errorf("the restart wrote %s", line)
		}
	}
	if got := clientsOf(t, l.fake, m); len(got) != 1 || got["10.1.0.1"] != "10.244.1.8 . 8443" {
		t.Fatalf("clients after the restart: %v, want only 10.1.0.1 on the endpoint that stays", got)
	}
	recordClient(t, l.fake, m, "10.1.0.3", "10.244.2.8 . 8443") // set up just before the transaction
	l.settle(st)
	if got := clientsOf(t, l.fake, m); len(got) != 1 {
		t.Fatalf("clients after the second look: %v", got)
	}
	l.services[0].Ports[0].Endpoints = eps("10.244.7.7:8080")
	if _, err := l.s.SyncChanges(context.Background(), l.services[:1], nil); err != nil {
		t.Fatal(err)
	}
	l.settle(Stats{})
}

// TestFullSyncRebuildsWhatItCannotRead: a backend that cannot read its table back rebuilds it,
// and so does the full sync after one whose difference the kernel refused.
func TestFullSyncRebuildsWhatItCannotRead(t *testing.T) {
	s := plannerAfter(t, goldenServices())
	st, err := s.Sync(context.Background(), goldenServices(), true)
	if err != nil || st.Rebuilt != "this backend cannot read its table back" {
		t.Fatalf("%+v %v", st, err)
	}
	nft := &failingNFT{Interface: knftables.NewFake(knftables.IPv4Family, TableName)}
	s, err = New(nft, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, s, goldenServices(), true)
	changed := goldenServices()
	changed[0].Ports[0].Endpoints = eps("10.244.7.7:8080")
	if st := mustSync(t, s, changed, true); st.Rebuilt == "" {
		t.Fatalf("a wrapper that hides knftables' fake could be read: %+v", st)
	}
}

func TestFailedFullSyncIsFollowedByARebuild(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	nft := &goldenNFT{Fake: fake}
	s, err := New(nft, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, s, goldenServices(), true)
	changed := goldenServices()
	changed[0].Ports[0].Endpoints = eps("10.244.7.7:8080")
	nft.failNext = true
	if st, err := s.Sync(context.Background(), changed, true); err == nil || st.Rebuilt != "" {
		t.Fatalf("a refused difference: %+v %v", st, err)
	}
	if st := mustSync(t, s, changed, false); st.Rebuilt != "the last full sync's transaction was refused" {
		t.Fatalf("the sync after it: %+v", st)
	}
	if st := mustSync(t, s, changed, true); st.Rebuilt != "" || st.Operations != 0 {
		t.Fatalf("the next full sync: %+v", st)
	}
}

// TestFullPlanIsPure: planning a full sync twice from the same state, table and view gives the
// same plan and leaves the state as it was.
func TestFullPlanIsPure(t *testing.T) {
	l := newFullLab(t)
	twin := plannerAfter(t, goldenServices())
	if !reflect.DeepEqual(l.s.state, twin.state) {
		t.Fatal("two Syncers that synced the same Services remember different things")
	}
	l.edit(func(tx *knftables.Transaction) {
		tx.Add(&knftables.Chain{Name: "intruder"})
		tx.Delete(&knftables.Element{Set: "cluster-ports", Key: []string{"10.96.0.10", "tcp", "80"}})
	})
	l.services[1].Ports[0].Endpoints = eps("10.244.9.1:8080")
	img, sp, err := l.s.back.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	view := kernelView{table: img, spell: sp}
	plan := func() *plan {
		in := l.s.prepare(l.services, true)
		return l.s.pl.planFull(&l.s.state, l.s.pl.renderFull(&l.s.state, in.desired), view, l.clock.now)
	}
	p1, p2 := plan(), plan()
	if !samePlan(p1, p2) || len(p1.ops) == 0 || p1.rebuilt != "" {
		t.Fatalf("two plans of the same input differ, or nothing to write:\n%s\n%s", planText(p1.ops), planText(p2.ops))
	}
	if !reflect.DeepEqual(l.s.state, twin.state) {
		t.Fatal("planning changed the state")
	}
}

// TestKeysReadBackAsValues: a key a speller spelled reads back as the values it came from, so
// an element the sync does not want can be deleted.
func TestKeysReadBackAsValues(t *testing.T) {
	endpoints := &ruleset.Set{Name: "m", KeyOf: []ruleset.Field{{Kind: ruleset.DAddr}, {Kind: ruleset.Dport, Proto: ruleset.TCP}, {Kind: ruleset.Numgen}},
		DataOf: []ruleset.Field{{Kind: ruleset.DAddr}, {Kind: ruleset.Dport, Proto: ruleset.TCP}}}
	pick := &ruleset.Element{Set: "m", Map: true, Key: []ruleset.Value{ruleset.Addr(ips("10.0.0.1")[0]), ruleset.Port(80), ruleset.Index(3)},
		Value: endpointValue(eps("10.1.1.1:8080")[0].Addr)}
	ports := &ruleset.Set{Name: "p", Key: clusterPortKey(ipv6)}
	port := &ruleset.Element{Set: "p", Key: []ruleset.Value{ruleset.Addr(ips("fd00::1")[0]), ruleset.Proto(ruleset.SCTP), ruleset.Port(9)}}
	v4 := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
	v6 := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv6}
	for _, c := range []struct {
		sp speller
		s  *ruleset.Set
		e  *ruleset.Element
	}{
		{fakeSpeller{fam: ruleset.IPv4}, endpoints, pick}, {netlinkSpeller{fam: ipv4, table: v4}, endpoints, pick},
		{fakeSpeller{fam: ruleset.IPv6}, ports, port}, {netlinkSpeller{fam: ipv6, table: v6}, ports, port},
	} {
		ss, err := c.sp.set(c.s)
		if err != nil {
			t.Fatal(err)
		}
		key, _, err := ss.element(c.e)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := ss.values(key)
		if err != nil || !reflect.DeepEqual(vals, c.e.Key) {
			t.Errorf("%T %s: %q read back as %v (%v), want %v", c.sp, c.s.Name, key, vals, err, c.e.Key)
		}
	}
}
