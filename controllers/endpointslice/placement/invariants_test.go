package placement

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// planAndCheck runs Plan on in, applies the result to c (which must hold
// exactly in.Existing) and asserts every property placement promises. It
// returns the result.
func planAndCheck(t testing.TB, c *cluster, in Input) Result {
	t.Helper()
	before := in.Existing
	existingCopy, desiredCopy := cloneInput(in)
	hintsCopy := cloneHints(in.Hints)
	r := Plan(in)
	if r.Err != nil {
		t.Fatalf("Plan: %v", r.Err)
	}
	if again := Plan(in); !sameResult(again, r) {
		t.Fatalf("Plan is not deterministic")
	}
	if !sameSlices(existingCopy, in.Existing) || !sameEndpoints(desiredCopy, in.Desired) {
		t.Fatalf("Plan modified its input")
	}
	checkResultShape(t, in, r)
	// Writing through the result must not reach the input.
	for _, s := range append(slices.Clone(r.Update), r.Create...) {
		for i := range s.Endpoints {
			s.Endpoints[i].Addresses[0] = "scribbled"
			if ready := s.Endpoints[i].Conditions.Ready; ready != nil {
				*ready = !*ready
			}
			if h := s.Endpoints[i].Hints; h != nil && len(h.ForZones) > 0 {
				h.ForZones[0].Name = "scribbled"
			}
		}
	}
	if !sameSlices(existingCopy, in.Existing) || !sameEndpoints(desiredCopy, in.Desired) ||
		!maps.EqualFunc(hintsCopy, in.Hints, sameHints) {
		t.Fatalf("Plan's output aliases its input")
	}
	r = Plan(in) // the scribbled copy is useless now

	c.apply(t, r)
	after := c.list()
	checkState(t, in, after)
	checkMoves(t, before, after, r)
	checkHints(t, in, before, after)

	// An immediately repeated sync writes nothing.
	repeat := in
	repeat.Existing = after
	if again := Plan(repeat); again.Writes() != 0 || again.Err != nil {
		t.Fatalf("repeated Plan writes %d (create %v update %v delete %v)", again.Writes(),
			sizes(again.Create), names(again.Update), names(again.Delete))
	}
	return r
}

// checkResultShape asserts the form of a result: creates are unnamed and
// carry the set's fields, updates and deletes name distinct existing slices.
func checkResultShape(t testing.TB, in Input, r Result) {
	t.Helper()
	existing := map[string]bool{}
	for _, s := range in.Existing {
		existing[s.Name] = true
	}
	for _, s := range r.Create {
		if s.Name != "" || s.AddressType != in.AddressType || !endpoints.PortsEqual(s.Ports, in.Ports) || len(s.Endpoints) == 0 {
			t.Fatalf("malformed create %+v", s)
		}
	}
	written := map[string]bool{}
	for _, s := range append(slices.Clone(r.Update), r.Delete...) {
		if !existing[s.Name] || written[s.Name] {
			t.Fatalf("slice %q written twice or not an existing slice", s.Name)
		}
		written[s.Name] = true
	}
	if !slices.IsSortedFunc(r.Update, byName) || !slices.IsSortedFunc(r.Delete, byName) {
		t.Fatalf("updates or deletes not sorted by name")
	}
}

// checkState asserts the set after the write: each desired endpoint exactly
// once with its desired content, no slice over the maximum or empty, and no
// more slices than the bound.
func checkState(t testing.TB, in Input, after []*discoveryv1.EndpointSlice) {
	t.Helper()
	want := map[endpoints.Identity]discoveryv1.Endpoint{}
	for _, e := range in.Desired {
		if _, dup := want[endpoints.IdentityOf(&e)]; !dup && len(e.Addresses) > 0 {
			want[endpoints.IdentityOf(&e)] = e
		}
	}
	seen := map[endpoints.Identity]bool{}
	for _, s := range after {
		if len(s.Endpoints) > in.MaxPerSlice {
			t.Fatalf("slice %s holds %d endpoints, max %d", s.Name, len(s.Endpoints), in.MaxPerSlice)
		}
		if len(s.Endpoints) == 0 {
			t.Fatalf("slice %s is empty", s.Name)
		}
		for _, e := range s.Endpoints {
			id := endpoints.IdentityOf(&e)
			d, ok := want[id]
			switch {
			case !ok:
				t.Fatalf("slice %s lists undesired endpoint %v", s.Name, id)
			case seen[id]:
				t.Fatalf("endpoint %v listed twice", id)
			case !endpoints.EndpointsEqual(e, d):
				t.Fatalf("endpoint %v has stale content", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d desired endpoints listed, want %d", len(seen), len(want))
	}
	n := len(want)
	if n > 0 && len(after) > ceilDiv(n, in.MaxPerSlice)+in.Slack {
		t.Fatalf("%d slices for %d endpoints, bound %d", len(after), n, ceilDiv(n, in.MaxPerSlice)+in.Slack)
	}
	if n == 0 && len(after) != 0 {
		t.Fatalf("%d slices left without endpoints", len(after))
	}
}

// checkMoves asserts that endpoints changed slice only out of slices that
// compaction merged away or that were trimmed, and that Stats.Moved counts
// them.
func checkMoves(t testing.TB, before, after []*discoveryv1.EndpointSlice, r Result) {
	t.Helper()
	allowed := map[string]bool{}
	for _, name := range append(slices.Clone(r.Compacted), r.Trimmed...) {
		allowed[name] = true
	}
	// An endpoint listed twice before "was" in both slices.
	was := map[endpoints.Identity]map[string]bool{}
	for _, s := range before {
		for i := range s.Endpoints {
			id := endpoints.IdentityOf(&s.Endpoints[i])
			if was[id] == nil {
				was[id] = map[string]bool{}
			}
			was[id][s.Name] = true
		}
	}
	is := location(after)
	moved := 0
	for id, now := range is {
		then, existed := was[id]
		if !existed || then[now] {
			continue
		}
		moved++
		for from := range then {
			if !allowed[from] {
				t.Fatalf("endpoint %v moved from %s to %s, which neither compaction nor trimming did", id, from, now)
			}
		}
	}
	if moved != r.Stats.Moved {
		t.Fatalf("Stats.Moved = %d, observed %d moves", r.Stats.Moved, moved)
	}
}

// checkHints asserts that every endpoint ends with the hints in.Hints decides
// for it, and that one it does not list keeps the hints it had (or, when new,
// brings those of its desired value).
func checkHints(t testing.TB, in Input, before, after []*discoveryv1.EndpointSlice) {
	t.Helper()
	had := map[endpoints.Identity]*discoveryv1.EndpointHints{}
	for _, s := range before {
		for i := range s.Endpoints {
			had[endpoints.IdentityOf(&s.Endpoints[i])] = s.Endpoints[i].Hints
		}
	}
	brought := map[endpoints.Identity]*discoveryv1.EndpointHints{}
	for i := range in.Desired {
		if id := endpoints.IdentityOf(&in.Desired[i]); brought[id] == nil {
			brought[id] = in.Desired[i].Hints
		}
	}
	for _, s := range after {
		for i := range s.Endpoints {
			id := endpoints.IdentityOf(&s.Endpoints[i])
			want, decided := in.Hints[id]
			if !decided {
				var existed bool
				if want, existed = had[id]; !existed {
					want = brought[id]
				}
			}
			if !endpoints.HintsEqual(want, s.Endpoints[i].Hints) {
				t.Fatalf("endpoint %v in %s has hints %v, want %v (decided: %v)", id, s.Name, s.Endpoints[i].Hints, want, decided)
			}
		}
	}
}

// cloneInput deep-copies in's slices, keeping nil lists nil so that the
// copies compare equal with reflect.DeepEqual.
func cloneInput(in Input) ([]*discoveryv1.EndpointSlice, []discoveryv1.Endpoint) {
	var existing []*discoveryv1.EndpointSlice
	for _, s := range in.Existing {
		existing = append(existing, s.DeepCopy())
	}
	var desired []discoveryv1.Endpoint
	for i := range in.Desired {
		desired = append(desired, *in.Desired[i].DeepCopy())
	}
	if in.Existing != nil && existing == nil {
		existing = []*discoveryv1.EndpointSlice{}
	}
	if in.Desired != nil && desired == nil {
		desired = []discoveryv1.Endpoint{}
	}
	return existing, desired
}

func cloneHints(in map[endpoints.Identity]*discoveryv1.EndpointHints) map[endpoints.Identity]*discoveryv1.EndpointHints {
	if in == nil {
		return nil
	}
	out := make(map[endpoints.Identity]*discoveryv1.EndpointHints, len(in))
	for id, h := range in {
		out[id] = h.DeepCopy()
	}
	return out
}

// The comparisons below are exact for every field Plan could touch and much
// cheaper than reflect.DeepEqual, which keeps the fuzzers fast.

func sameResult(a, b Result) bool {
	return sameSlices(a.Create, b.Create) && sameSlices(a.Update, b.Update) && sameSlices(a.Delete, b.Delete) &&
		a.Stats == b.Stats && slices.Equal(a.Compacted, b.Compacted) && slices.Equal(a.Trimmed, b.Trimmed) &&
		slices.Equal(a.Ignored, b.Ignored) && a.Err == nil && b.Err == nil
}

func sameSlices(a, b []*discoveryv1.EndpointSlice) bool {
	return len(a) == len(b) && (a == nil) == (b == nil) && slices.EqualFunc(a, b, sameSlice)
}

func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.AddressType == b.AddressType && maps.Equal(a.Labels, b.Labels) &&
		maps.Equal(a.Annotations, b.Annotations) && reflect.DeepEqual(a.Ports, b.Ports) &&
		(a.DeletionTimestamp == nil) == (b.DeletionTimestamp == nil) && sameEndpoints(a.Endpoints, b.Endpoints)
}

func sameEndpoints(a, b []discoveryv1.Endpoint) bool {
	return len(a) == len(b) && (a == nil) == (b == nil) && slices.EqualFunc(a, b, func(x, y discoveryv1.Endpoint) bool {
		return endpoints.EndpointsEqual(x, y) && sameHints(x.Hints, y.Hints) &&
			(x.TargetRef == nil || *x.TargetRef == *y.TargetRef)
	})
}

func sameHints(a, b *discoveryv1.EndpointHints) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.ForZones, b.ForZones) && slices.Equal(a.ForNodes, b.ForNodes)
}
