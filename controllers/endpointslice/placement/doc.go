// Package placement decides which EndpointSlice of one slice set each
// desired endpoint lives in, and so which slices to create, update and
// delete. It is a pure function of the existing slices and the desired
// endpoints: no client, no clock, no randomness.
//
// # Goals, in order
//
//  1. Correctness: afterwards every desired endpoint is listed exactly once
//     across the set, no slice holds more than MaxPerSlice endpoints and no
//     slice of the set is empty.
//  2. Few API writes. Every create, update and delete is one write that every
//     watcher of EndpointSlices (each node's proxy) receives, so writes are
//     what placement minimises. A sync in which nothing changed writes
//     nothing.
//  3. Bounded fragmentation: a set of n endpoints ends with at most
//     ceil(n/MaxPerSlice) + Slack slices.
//  4. Few moves: an endpoint stays in the slice it is in unless compaction
//     merges that slice away (or the slice is over a lowered maximum), so
//     consumers see an endpoint change only when its content changes.
//
// # Lazy phase (what upstream does)
//
// The first phase follows the upstream controller (k8s.io/endpointslice,
// reconcileByPortMapping), made deterministic:
//
//  1. Walk the existing slices (by name). Keep each endpoint that is still
//     desired where it is; if its content changed (EndpointsEqual, which
//     ignores hints) or its hints differ from those Hints decides, replace
//     it in place (an endpoint Hints does not list carries its existing
//     hints over); drop endpoints no longer desired and second copies of one
//     endpoint. A slice that dropped or replaced anything, or for which
//     NeedsUpdate says so, will be updated ("dirty"); a slice left with no
//     endpoints is free for reuse and otherwise deleted.
//  2. Put new endpoints into dirty slices first, fullest first: those slices
//     are written anyway, so filling them is free.
//  3. While endpoints remain: if fewer than MaxPerSlice remain, put all of
//     them into the untouched slice that ends up closest to full (one extra
//     write); otherwise fill a fresh slice, reusing the name of an emptied
//     slice before creating a new one (an update instead of a create plus a
//     delete).
//
// # Compaction phase (what upstream lacks)
//
// Upstream never merges slices, so a long rolling update leaves many
// half-empty slices behind. When the lazy layout has more than
// B = ceil(n/MaxPerSlice) + Slack slices, compaction removes exactly
// r = (slices - B) of them in the same plan, moving their endpoints into
// the room of the slices that stay.
//
// Cost model. Compaction starts from the lazy layout, in which each slice is
// either "free" (already written by this plan: a dirty existing slice, a
// reused one or a slice to create) or "untouched" (unchanged, no write). It
// counts API writes exactly:
//
//	writes = creates + updates + deletes - min(creates, deletes)
//
// where the last term is name reuse (a create paired with a delete becomes a
// single update). Relative to the lazy layout:
//
//   - removing a free slice never costs a write (an update becomes a delete,
//     or a create is dropped);
//   - removing an untouched slice costs one write (a delete);
//   - putting endpoints into a free slice costs nothing;
//   - putting endpoints into an untouched slice costs one write (an update).
//
// Removing any free slice raises the number of endpoints that must land in
// untouched slices by exactly MaxPerSlice (its endpoints must go, its room is
// lost), whichever free slice it is. So for each split of r into a free
// removals and b untouched ones the cheapest plan removes the a free slices
// holding the fewest pre-existing endpoints (slices to create first: they
// hold none) and the b emptiest untouched slices, then fills all remaining
// free room and, if that is not enough, the untouched slices with the most
// room (the fewest of them). An exchange argument shows emptiest-first is
// optimal for the untouched side: swapping a removed slice for a fuller kept
// one never saves a write and moves more endpoints. Compaction evaluates
// every split and picks the fewest writes, then the fewest moved endpoints
// (prefer deleting the emptiest), then the fewest untouched slices touched.
// The capacity check B*MaxPerSlice >= n guarantees every split fits.
//
// Compaction is not a global optimum over all layouts (the lazy phase has
// already committed to its choices); it is the cheapest way to get back under
// the bound from where the lazy phase left off, and it never runs while the
// set is within the bound, so a sync without changes stays write-free.
//
// # Hints
//
// Which hints each endpoint carries is decided before placement, from the
// desired endpoints and the hints they carry now, and comes in as
// Input.Hints. Deciding first lets placement count a slice whose hints change
// as written anyway: new endpoints fill it instead of an untouched slice, and
// compaction treats it as free. Were hints applied after placement, that
// slice would be written once for its hints and another slice once for the
// new endpoints.
//
// # Not handled here
//
// The placeholder slice a Service with no endpoints gets (no ports, no
// endpoints) is the caller's: Plan with no desired endpoints deletes every
// slice of the set. A placeholder has the key of the port-less set, so the
// caller must keep it out of Existing. Labels, annotations, owner references
// and names of new slices are the caller's too; NeedsUpdate lets it mark
// slices whose metadata is stale so they are rewritten (and filled) anyway.
package placement
