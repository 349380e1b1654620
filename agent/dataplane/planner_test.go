package dataplane

import (
	"context"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/nftext"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// plannerAfter returns a Syncer whose state is what a full sync of before left (through a
// backend that accepts everything), ready to plan.
func plannerAfter(t testing.TB, before []Service) *Syncer {
	t.Helper()
	s, err := NewWithBackend(&recordingBackend{}, Options{PodCIDRs: goldenPodCIDRs, Clock: (&fakeClock{now: time.Unix(0, 0)}).Now})
	if err != nil {
		t.Fatal(err)
	}
	s.scratch.hasher.h.SetSeed(failureSeed)
	if _, err := s.Sync(context.Background(), before, true); err != nil {
		t.Fatal(err)
	}
	return s
}

// planFor plans, without a backend, the incremental sync of after with view as the kernel.
func planFor(s *Syncer, after []Service, view kernelView, now time.Time) *plan {
	in := s.prepare(after, false)
	d := s.pl.diff(&s.state, in.desired, s.unseen())
	return s.pl.planIncremental(&s.state, d, view, now)
}

func planText(ops []ruleset.Op) string {
	tx := knftables.NewFake(knftables.IPv4Family, TableName).NewTransaction()
	nftext.Transaction(tx, ruleset.IPv4, ops)
	return tx.String()
}

func TestPlanIncremental(t *testing.T) {
	sticky := tcpService("ns", "sticky", "10.96.0.9", 80, "10.244.0.1:80", "10.244.0.2:80")
	sticky.AffinityTimeout = time.Hour
	m := renderService(&sticky, ipv4).affinity[0]
	client := func(addr string, v ruleset.Value) clientEntry { return clientEntry{netip.MustParseAddr(addr), v} }
	lost := sticky
	lost.Ports = []Port{sticky.Ports[0]}
	lost.Ports[0].Endpoints = eps("10.244.0.2:80")
	cases := []struct {
		name          string
		before, after []Service
		view          kernelView
		want          []string // lines of the transaction, in order
	}{
		{"nothing changed", manyServices(2), manyServices(2), kernelView{}, nil},
		{"an endpoint replaced", manyServices(1), []Service{tcpService("ns", "s00", "10.96.1.1", 80, "10.244.1.1:8080", "10.244.9.9:8080")}, kernelView{}, []string{
			"delete element ip fleetslice cluster-endpoints-tcp { 10.96.1.1 . 80 . 1 }",
			"add element ip fleetslice cluster-endpoints-tcp { 10.96.1.1 . 80 . 1 : 10.244.9.9 . 8080 }",
		}},
		{"an affinity endpoint lost: its client forgotten", []Service{sticky}, []Service{lost}, kernelView{clients: map[string][]clientEntry{
			m.addr: {client("10.1.0.1", ruleset.Addr(netip.MustParseAddr("10.244.0.1"))), client("10.1.0.2", ruleset.Addr(netip.MustParseAddr("10.244.0.2")))},
			m.port: {client("10.1.0.1", ruleset.Port(80)), client("10.1.0.2", ruleset.Port(80))},
		}}, []string{
			"add element ip fleetslice " + m.addr + " { 10.1.0.1 : 10.244.0.1 }",
			"delete element ip fleetslice " + m.addr + " { 10.1.0.1 }",
			"add element ip fleetslice " + m.port + " { 10.1.0.1 : 80 }",
			"delete element ip fleetslice " + m.port + " { 10.1.0.1 }",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := plannerAfter(t, tc.before)
			p := planFor(s, tc.after, tc.view, time.Unix(0, 0))
			got := strings.Split(strings.TrimSpace(planText(p.ops)), "\n")
			if len(p.ops) == 0 {
				got = nil
			}
			if tc.name == "an affinity endpoint lost: its client forgotten" {
				got = got[len(got)-len(tc.want):] // the element changes before the forgetting are another test's
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("transaction:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// FuzzPlanIsPure checks the planner's contract on random changes: planning twice from the same
// state, input and kernel view gives the same plan, and planning changes nothing in the state
// (compared with a state built the same way and never planned on).
func FuzzPlanIsPure(f *testing.F) {
	f.Add([]byte{0, 1, 8, 3, 16, 2, 24, 1, 32, 3})
	f.Add([]byte{40, 5, 41, 5, 48, 1, 56, 7, 64, 200, 1, 0})
	f.Add([]byte{17, 3, 18, 1, 25, 3, 33, 7, 10, 2, 2, 11})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 40 {
			ops = ops[:40]
		}
		world, present := initialWorld(5)
		for i := range world {
			world[i].AffinityTimeout = time.Duration(i%2) * time.Minute
		}
		before := snapshot(world, present)
		for step := 0; step+1 < len(ops); step += 2 {
			mutate(world, present, ops[step], ops[step+1])
		}
		after := snapshot(world, present)
		s, twin := plannerAfter(t, before), plannerAfter(t, before)
		var view kernelView
		for _, m := range allAffinity(s) {
			view = kernelView{clients: map[string][]clientEntry{m.addr: {{netip.MustParseAddr("10.1.0.1"), ruleset.Addr(m.endpoints[0].Addr())}}}}
		}
		now := time.Unix(2, 0)
		p1, p2 := planFor(s, after, view, now), planFor(s, after, view, now)
		if !samePlan(p1, p2) {
			t.Fatalf("two plans of the same input differ:\n%s\n%s", planText(p1.ops), planText(p2.ops))
		}
		if !reflect.DeepEqual(s.state, twin.state) {
			t.Fatal("planning changed the state")
		}
		// The same of a full sync, against the table a rebuild of before leaves.
		view.table, view.spell = fakeImage(t, before), fakeSpeller{fam: ruleset.IPv4}
		f1, f2 := planFullFor(s, after, view, now), planFullFor(s, after, view, now)
		if !samePlan(f1, f2) {
			t.Fatalf("two full plans of the same input differ:\n%s\n%s", planText(f1.ops), planText(f2.ops))
		}
		if !reflect.DeepEqual(s.state, twin.state) {
			t.Fatal("planning a full sync changed the state")
		}
	})
}

// planFullFor plans, without a backend, the full sync of after with view as the kernel.
func planFullFor(s *Syncer, after []Service, view kernelView, now time.Time) *plan {
	in := s.prepare(after, true)
	return s.pl.planFull(&s.state, s.pl.renderFull(&s.state, in.desired), view, now)
}

// fakeImage is the table a full sync of services leaves in knftables' fake, as a full sync
// reads it.
func fakeImage(t testing.TB, services []Service) *tableImage {
	s, fake, _ := newFakeSyncer(t, Options{PodCIDRs: goldenPodCIDRs})
	mustSync(t, s, services, true)
	return parseDump(fake.Dump(), knftables.IPv4Family)
}

func allAffinity(s *Syncer) []affinityMap {
	var out []affinityMap
	for _, key := range sortedKeys(s.state.written) {
		for _, m := range s.state.written[key].affinity {
			if len(m.endpoints) > 0 {
				out = append(out, m)
			}
		}
	}
	return out
}

// BenchmarkPlanOneChange5000x10 times planning alone, without a backend: the scan of 5,000
// Services and the plan of one changed one.
func BenchmarkPlanOneChange5000x10(b *testing.B) {
	services := scaleServices(benchServices, benchEndpoints)
	s := plannerAfter(b, services)
	generation := 0
	b.ReportAllocs()
	for b.Loop() {
		generation++
		victim := generation % benchServices
		was := services[victim].Ports[0].Endpoints
		services[victim].Ports[0].Endpoints = scaleEndpoints(victim, benchEndpoints, generation%7+1)
		if p := planFor(s, services, kernelView{}, time.Unix(0, 0)); p.changed != 1 {
			b.Fatalf("changed = %d", p.changed)
		}
		services[victim].Ports[0].Endpoints = was // the plan is not applied: the state stays

	}
}

// samePlan compares two plans with their runs of elements spelled out (a run renders its
// elements from a function, which reflect.DeepEqual never finds equal to another).
func samePlan(a, b *plan) bool {
	spelled := func(p *plan) plan {
		c := *p
		c.ops, c.table = ruleset.Expand(p.ops), ruleset.Expand(p.table)
		return c
	}
	return reflect.DeepEqual(spelled(a), spelled(b))
}

// A full sync shares the written record's normalized Service when the input is the one it was
// written from, and normalizes a changed one afresh; either way it plans what it would plan
// from a Syncer that never saw the Services (TestGoldenTransactions and FuzzPlanIsPure hold
// the plans themselves).
func TestFullSyncSharesUnchangedServices(t *testing.T) {
	before := manyServices(3)
	s := plannerAfter(t, before)
	after := snapshot(before, []bool{true, true, true})
	after[1].Ports[0].Endpoints = eps("10.244.7.7:8080")
	in := s.prepare(after, true)
	if len(in.desired) != 3 {
		t.Fatalf("a full sync prepared %d Services, want 3", len(in.desired))
	}
	for _, d := range in.desired {
		rec := s.state.written[d.key]
		shared := len(d.svc.Ports) > 0 && &d.svc.Ports[0] == &rec.svc.Ports[0]
		if want := d.key != after[1].Key(); shared != want {
			t.Errorf("%s: shares the record's normalized Service: %v, want %v", d.key, shared, want)
		}
		fresh, _, _ := normalize(after[slices.IndexFunc(after, func(a Service) bool { return a.Key() == d.key })], ipv4)
		if !reflect.DeepEqual(d.svc, fresh) || !reflect.DeepEqual(d.claims, claimsOf(&fresh)) || d.fingerprint != fingerprint(&fresh) {
			t.Errorf("%s: prepared %+v, normalizing gives %+v", d.key, d.svc, fresh)
		}
	}
}
