package placement

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// world is the desired state a fuzzed sequence evolves: endpoint number ->
// its readiness and zone.
type world struct {
	ready map[int]bool
	zone  map[int]int
	next  int
}

func (w *world) desired() []discoveryv1.Endpoint {
	ids := slices.Sorted(maps.Keys(w.ready))
	out := make([]discoveryv1.Endpoint, len(ids))
	for i, id := range ids {
		out[i] = ep(id)
		out[i].Conditions.Ready = ptr.To(w.ready[id])
		out[i].Conditions.Serving = ptr.To(w.ready[id])
		out[i].Zone = ptr.To(fmt.Sprintf("zone-%d", w.zone[id]))
	}
	return out
}

// some returns up to k of the current endpoints, chosen by rng.
func (w *world) some(rng *rand.Rand, k int) []int {
	ids := slices.Sorted(maps.Keys(w.ready))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids[:min(k, len(ids))]
}

const (
	opAdd = iota
	opRemove
	opChangeZone
	opFlipReadiness
	opReplace // a rolling-update step: remove k old, add k new
	opMarkStale
	opHint // the topology pass writes hints
	opChangeMax
	opDecideHints // this sync's topology decision rewrites some endpoints' hints
	opCount
)

// FuzzPlanSequences replays random sequences of adds, removes, content
// changes, readiness flips, rolling replacements, stale metadata, hint
// writes, hint decisions and maximum changes through Plan, applying each result, and checks
// every promise of placement after every step (see planAndCheck): each
// desired endpoint exactly once, no slice over the maximum or empty, at most
// ceil(n/max)+slack slices, nothing written by an immediately repeated Plan,
// endpoints moved only out of compacted or trimmed slices, hints decided or kept,
// inputs not modified, deterministic output.
func FuzzPlanSequences(f *testing.F) {
	f.Add(uint8(10), uint8(1), []byte{opAdd, 35, opRemove, 7, opFlipReadiness, 5, opReplace, 10, opReplace, 10, opReplace, 10})
	f.Add(uint8(4), uint8(0), []byte{opAdd, 17, opHint, 9, opChangeZone, 3, opMarkStale, 1, opAdd, 2, opRemove, 30})
	f.Add(uint8(100), uint8(1), []byte{opAdd, 250, opReplace, 60, opReplace, 60, opReplace, 60, opReplace, 60, opReplace, 60})
	f.Add(uint8(20), uint8(2), []byte{opAdd, 90, opChangeMax, 7, opRemove, 40, opChangeMax, 30, opAdd, 11, opHint, 50})
	f.Add(uint8(1), uint8(0), []byte{opAdd, 5, opRemove, 2, opAdd, 3, opFlipReadiness, 4})
	f.Add(uint8(7), uint8(3), []byte{opAdd, 60, opRemove, 13, opRemove, 13, opRemove, 13, opAdd, 6, opMarkStale, 4, opAdd, 1})
	f.Add(uint8(10), uint8(1), []byte{opAdd, 40, opHint, 3, opDecideHints, 20, opReplace, 9, opDecideHints, 200, opAdd, 7, opDecideHints, 5})
	f.Fuzz(replaySequence)
}

// replaySequence is FuzzPlanSequences' body: ops are (operation, argument)
// byte pairs.
func replaySequence(t *testing.T, maxByte, slackByte uint8, ops []byte) {
	{
		max := 1 + int(maxByte)%40
		slack := int(slackByte) % 4
		w := &world{ready: map[int]bool{}, zone: map[int]int{}}
		c := newCluster()
		for step := 0; len(ops) >= 2 && step < 32; step++ {
			op, arg := ops[0]%opCount, int(ops[1])
			ops = ops[2:]
			rng := rand.New(rand.NewPCG(uint64(arg), uint64(step)))
			switch op {
			case opAdd:
				w.add(arg)
			case opRemove:
				for _, id := range w.some(rng, arg) {
					delete(w.ready, id)
					delete(w.zone, id)
				}
			case opChangeZone:
				for _, id := range w.some(rng, arg) {
					w.zone[id]++
				}
			case opFlipReadiness:
				for _, id := range w.some(rng, arg) {
					w.ready[id] = !w.ready[id]
				}
			case opReplace:
				old := w.some(rng, arg)
				for _, id := range old {
					delete(w.ready, id)
					delete(w.zone, id)
				}
				w.add(len(old))
			case opMarkStale:
				for _, s := range c.list() {
					if rng.IntN(3) == 0 {
						live := c.slices[s.Name]
						if live.Labels == nil {
							live.Labels = map[string]string{}
						}
						live.Labels[staleLabel] = ""
					}
				}
			case opHint:
				for _, listed := range c.list() {
					s := c.slices[listed.Name]
					for i := range s.Endpoints {
						if rng.IntN(2) == 0 {
							s.Endpoints[i] = hinted(s.Endpoints[i], fmt.Sprintf("zone-%d", rng.IntN(3)))
						}
					}
				}
			case opChangeMax:
				max = 1 + arg%40
			}
			in := input(max, slack, w.desired(), c.list()...)
			in.NeedsUpdate = isStale
			if op == opDecideHints {
				// Decisions cover current endpoints and a few that are gone
				// (which Plan must ignore); nil means "no hints".
				in.Hints = map[endpoints.Identity]*discoveryv1.EndpointHints{}
				for _, id := range append(w.some(rng, arg), w.next, w.next+1) {
					e := ep(id)
					var h *discoveryv1.EndpointHints
					if zone := rng.IntN(4); zone < 3 {
						h = hinted(e, fmt.Sprintf("zone-%d", zone)).Hints
					}
					in.Hints[endpoints.IdentityOf(&e)] = h
				}
			}
			planAndCheck(t, c, in)
		}
	}
}

// maxWorld caps the number of endpoints: the properties do not need big
// sets (the benchmarks cover scale) and small ones keep the fuzzer fast.
const maxWorld = 160

func (w *world) add(k int) {
	for range min(k, maxWorld-len(w.ready)) {
		w.ready[w.next] = w.next%3 != 0
		w.zone[w.next] = w.next % 3
		w.next++
	}
}
