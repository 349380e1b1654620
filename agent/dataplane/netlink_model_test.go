package dataplane

import (
	"math/rand/v2"
	"net/netip"
	"testing"

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
