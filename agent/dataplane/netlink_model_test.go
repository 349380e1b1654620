package dataplane

import (
	"context"
	"maps"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// TestModelDigestFollowsItsElements replays random element additions, replacements, deletions
// and flushes, and checks that each set's digest and count are those of a model given only the
// elements the set ends with: the drift check compares exactly these with the kernel.
func TestModelDigestFollowsItsElements(t *testing.T) {
	digest := func(e *ruleset.Element) (elemDigest, error) {
		// Two kernel elements for a value above 200, as an interval would be.
		d := elemDigest{sum: uint64(e.Key[0].Num)*1_000_003 + uint64(e.Value[0].Num), pieces: 1}
		if e.Value[0].Num > 200 {
			d.pieces = 2
		}
		return d, nil
	}
	set := &ruleset.Set{Name: "m"}
	element := func(k, v uint32) *ruleset.Element {
		key := []ruleset.Value{ruleset.Addr(netip.AddrFrom4([4]byte{10, 0, byte(k >> 8), byte(k)})), ruleset.Port(uint16(k))}
		return &ruleset.Element{Set: "m", Map: true, Key: key, Value: []ruleset.Value{ruleset.Port(uint16(v))}}
	}
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		m := newTableModel(digest)
		m.apply([]ruleset.Op{{Verb: ruleset.Add, Obj: &ruleset.Table{}}, {Verb: ruleset.Add, Obj: set}})
		final := map[uint32]uint32{}
		for range 400 {
			k := rng.Uint32N(60)
			switch r := rng.IntN(20); {
			case r == 0:
				m.apply([]ruleset.Op{{Verb: ruleset.Flush, Obj: set}})
				clear(final)
			case r < 7:
				m.apply([]ruleset.Op{{Verb: ruleset.Delete, Obj: element(k, 0)}})
				delete(final, k)
			default:
				v := rng.Uint32N(300)
				m.apply([]ruleset.Op{{Verb: ruleset.Add, Obj: element(k, v)}})
				final[k] = v
			}
		}
		fresh := newTableModel(digest)
		ops := []ruleset.Op{{Verb: ruleset.Add, Obj: set}}
		for k, v := range final {
			ops = append(ops, ruleset.Op{Verb: ruleset.Add, Obj: element(k, v)})
		}
		fresh.reset(ops)
		got, want := m.sets["m"], fresh.sets["m"]
		if got.sum != want.sum || got.pieces != want.pieces || len(got.elems) != len(final) {
			t.Fatalf("seed %d: digest %d of %d pieces (%d elements), want %d of %d (%d)",
				seed, got.sum, got.pieces, len(got.elems), want.sum, want.pieces, len(final))
		}
	}
}

// The netlink backend's model learns a batch's elements from the batch's log, taken as it
// encoded them, rather than rendering and encoding each again: after a rebuild and incremental
// syncs (endpoints replaced, a Service added and one removed, affinity among them) it holds what
// a model that spells every element again holds.
func TestModelFromTheBatchLogEqualsTheRendered(t *testing.T) {
	fam, _ := familyFor(knftables.IPv4Family)
	open := func(logs bool) (*Syncer, *netlinkBackend) {
		nl := &goldenNetlink{fake: knftables.NewFake(fam.nft, TableName), ids: map[uint32]int{}}
		b, err := newNetlinkBackend(fam.nft, nl.dial)
		if err != nil {
			t.Fatal(err)
		}
		b.model.full = !logs // a full model spells elements again: the path before the log
		s, err := NewWithBackend(b, Options{PodCIDRs: goldenPodCIDRs})
		if err != nil {
			t.Fatal(err)
		}
		return s, b
	}
	logged, lb := open(true)
	rendered, rb := open(false)
	lb.seed, lb.model.keys = rb.seed, rb.model.keys
	if !lb.model.logs() || rb.model.logs() {
		t.Fatal("the models do not take the paths compared")
	}
	services := manyServices(12)
	services[3].AffinityTimeout = time.Minute
	steps := []func(){
		func() {},
		func() { services[1].Ports[0].Endpoints = eps("10.244.7.1:8080", "10.244.7.2:8080") },
		func() { services = append(services[:5], services[6:]...) },
		func() { services = append(services, tcpService("ns", "late", "10.96.9.9", 80, "10.244.9.1:8080")) },
	}
	for i, step := range steps {
		step()
		for _, s := range []*Syncer{logged, rendered} {
			if _, err := s.Sync(context.Background(), services, i == 0); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if len(lb.model.sets) == 0 || len(lb.model.sets) != len(rb.model.sets) {
			t.Fatalf("step %d: %d sets, want %d", i, len(lb.model.sets), len(rb.model.sets))
		}
		for name, want := range rb.model.sets {
			got := lb.model.sets[name]
			if got == nil || got.sum != want.sum || got.pieces != want.pieces || !maps.Equal(got.elems, want.elems) {
				t.Fatalf("step %d: set %s differs from the model that spelled its elements again", i, name)
			}
		}
	}
}
