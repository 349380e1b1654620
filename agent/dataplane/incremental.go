package dataplane

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// change is one Service whose objects a sync rewrites or removes.
type change struct {
	key string
	old *serviceRecord // nil for a new Service
	// was is old's objects, rendered again from old.svc; nil for a new Service.
	was  *serviceObjects
	objs *serviceObjects
	rec  *serviceRecord // nil for a removed Service
}

// diff is what an incremental sync changes: the Services it rewrites or removes, sorted by key,
// and those whose input changed only in order (their raw digest, by key).
type diff struct {
	changes   []change
	reordered map[string]uint64
	changed   int
	removed   int
}

// diff compares desired, the Services to (re)write, and removed, the keys of written ones to
// delete, with st. It renders the Services that changed.
func (pl *planner) diff(st *state, desired []desiredService, removed []string) diff {
	var d diff
	for i := range desired {
		ds := &desired[i]
		old := st.written[ds.key]
		if old != nil && old.fingerprint == ds.fingerprint {
			// Input that differs only in order renders the same objects.
			if d.reordered == nil {
				d.reordered = map[string]uint64{}
			}
			d.reordered[ds.key] = ds.raw
			continue
		}
		objs := renderService(&ds.svc, pl.fam)
		d.changes = append(d.changes, change{key: ds.key, old: old, was: pl.renderWritten(old), objs: &objs, rec: newRecord(ds, &objs)})
	}
	d.changed = len(d.changes)
	for _, key := range removed {
		old := st.written[key]
		d.changes = append(d.changes, change{key: key, old: old, was: pl.renderWritten(old)})
	}
	d.removed = len(removed)
	slices.SortFunc(d.changes, func(a, b change) int { return cmp.Compare(a.key, b.key) })
	return d
}

// incremental is an incremental plan in the making: the state it starts from, which it only
// reads, the changes, and what each step works out for the steps after it.
type incremental struct {
	pl      *planner
	st      *state
	now     time.Time
	tx      txn
	changes []change
	// hairpin counts the users of each hairpin element after the sync (by id, see
	// hairpinKey.id), and hairpinKeys the elements the changes touch.
	hairpin     map[string]int
	hairpinKeys map[string]hairpinKey
	records     recordPlan
	newRecord   []chainContent // record chains that get their first endpoint
	oldRecord   []chainContent // record chains that lose their last one
	pickRefs    map[string]int // users of each pick chain after the sync
	stale       map[string]time.Time
}

// planIncremental writes only what differs from st, which it does not change: d says what
// changed, view what the kernel holds that the plan needs (see forget.go). The transaction is
// ordered so that it is valid whatever mix of changes it carries:
//
//  1. delete map elements that go away or change value (before any add of
//     the same key), and hairpin elements no Service needs any more;
//  2. delete chains that have been stale long enough;
//  3. create maps and chains of changed Services, flush the ones that may hold
//     old rules, and write their rules; then the affinity record chains that
//     get their first endpoint (see affinity.go);
//  4. add new map and hairpin elements (their target chains exist now);
//  5. flush record chains and chains the changed Services no longer use
//     (deleted later, see Options.StaleChainDelay) and delete their unused
//     affinity maps, after the rules that referenced them are gone;
//  6. forget the clients of endpoints that went (see forget.go).
func (pl *planner) planIncremental(st *state, d diff, view kernelView, now time.Time) *plan {
	p := &plan{changed: d.changed, removed: d.removed, pending: &pending{raw: d.reordered}}
	if len(d.changes) == 0 && !pl.staleDue(st, now) && !forgetIsDue(st, now) {
		return p
	}
	inc := &incremental{pl: pl, st: st, now: now, changes: d.changes}
	inc.count()
	inc.deleteElements()
	inc.deleteStaleChains()
	inc.writeChanged()
	inc.addElements()
	inc.retire()
	forget := inc.forget(view)
	for id, n := range inc.hairpin {
		if n <= 0 {
			delete(inc.hairpin, id)
		}
	}
	p.ops = inc.tx.ops
	p.pending.changes, p.pending.edits = d.changes, true
	p.pending.hairpinRefs, p.pending.pickRefs, p.pending.staleChains = inc.hairpin, inc.pickRefs, inc.stale
	p.pending.forgetDue, p.pending.records = forget, inc.records
	return p
}

// count works out, on copies, the users of hairpin elements, pick chains and record chains
// after the changes.
func (inc *incremental) count() {
	inc.hairpin, inc.hairpinKeys = maps.Clone(inc.st.hairpinRefs), map[string]hairpinKey{}
	inc.pickRefs = maps.Clone(inc.st.pickRefs)
	var gone, come []affinityMap
	tally := func(rec *serviceRecord, objs *serviceObjects, by int) {
		for _, k := range objs.hairpin {
			id := k.id()
			inc.hairpin[id] += by
			inc.hairpinKeys[id] = k
		}
		for _, name := range rec.picks {
			inc.pickRefs[name] += by
		}
	}
	for _, c := range inc.changes {
		if c.old != nil {
			tally(c.old, c.was, -1)
			gone = append(gone, c.old.affinity...)
		}
		if c.rec != nil {
			tally(c.rec, c.objs, +1)
			come = append(come, c.rec.affinity...)
		}
	}
	inc.records = inc.st.records.plan(gone, come)
	inc.newRecord, inc.oldRecord = inc.st.records.created(inc.records), inc.st.records.retired(inc.records)
}

// deleteElements is step 1.
func (inc *incremental) deleteElements() {
	for _, rc := range inc.records.changes {
		if rc.was != nil {
			inc.tx.Delete(&ruleset.Element{Set: mapAffinityEndpoints, Map: true, Key: rc.key})
		}
	}
	for _, c := range inc.changes {
		if c.old == nil {
			continue
		}
		keep := entryValues(c.objs)
		for i := range c.was.entries {
			if e := &c.was.entries[i]; !hasValue(keep, e) {
				inc.tx.Delete(e.element())
			}
		}
	}
	for _, id := range sortedKeys(inc.hairpinKeys) {
		if inc.hairpin[id] <= 0 && inc.st.hairpinRefs[id] > 0 {
			inc.tx.Delete(inc.hairpinKeys[id].element())
		}
	}
}

// deleteStaleChains is step 2: chains stale long enough go, unless a change brings them back.
func (inc *incremental) deleteStaleChains() {
	wanted := map[string]bool{}
	for name, n := range inc.pickRefs {
		if n > 0 {
			wanted[name] = true
		}
	}
	for _, c := range inc.changes {
		if c.rec != nil {
			for _, name := range c.rec.chains {
				wanted[name] = true
			}
		}
	}
	for _, c := range inc.newRecord {
		wanted[c.name] = true
	}
	inc.stale = maps.Clone(inc.st.staleChains)
	for _, name := range sortedKeys(inc.st.staleChains) {
		switch {
		case wanted[name]:
			delete(inc.stale, name)
		case inc.now.Sub(inc.st.staleChains[name]) >= inc.pl.opts.StaleChainDelay:
			inc.tx.Delete(&ruleset.Chain{Name: name})
			delete(inc.stale, name)
		}
	}
}

// writeChanged is step 3: pick chains that get their first user (a retired one is flushed, so
// it gets its rules again), then sets, maps, chains and rules; a chain whose rules are what they
// were, and a map that exists already, are left alone, so that an endpoint change within a map
// is only an element change.
func (inc *incremental) writeChanged() {
	written := map[string]bool{}
	for _, c := range inc.changes {
		if c.objs == nil {
			continue
		}
		for _, p := range c.objs.picks {
			if inc.st.pickRefs[p.name] <= 0 && !written[p.name] {
				written[p.name] = true
				writePick(&inc.tx, p, inc.pl.fam)
			}
		}
	}
	// The dispatch rules change only when a cluster pick chain comes or goes; they name the
	// chains and sets just written, and drop those retired below.
	if inUse := clusterPicksInUse(inc.pickRefs); !slices.Equal(inUse, clusterPicksInUse(inc.st.pickRefs)) {
		writeDispatch(&inc.tx, inUse, true)
	}
	for _, c := range inc.changes {
		if c.objs != nil {
			inc.writeService(c)
		}
	}
	// Record chains name the maps just written.
	for _, c := range inc.newRecord {
		writeChain(&inc.tx, c)
	}
}

// writeService writes what of a changed Service's chains and maps differs from its old ones.
func (inc *incremental) writeService(c change) {
	before := map[string]bool{}
	objs := *c.objs
	if c.old != nil {
		objs.chains, objs.affinity = nil, nil
		sums := make(map[string]uint64, len(c.old.chains))
		for k, name := range c.old.chains {
			before[name] = true
			sums[name] = c.old.chainSums[k]
		}
		for k, ch := range c.objs.chains {
			if sum, had := sums[ch.name]; !had || sum != c.rec.chainSums[k] {
				objs.chains = append(objs.chains, ch)
			}
		}
		hadMaps := toSet(affinityNames(c.old.affinity))
		for _, m := range c.objs.affinity {
			if !hadMaps[m.addr] {
				objs.affinity = append(objs.affinity, m)
			}
		}
	}
	writeServiceObjects(&inc.tx, &objs, inc.pl.fam, func(name string) bool {
		_, isStale := inc.st.staleChains[name]
		return before[name] || isStale
	})
}

// addElements is step 4.
func (inc *incremental) addElements() {
	for _, rc := range inc.records.changes {
		if rc.now != nil {
			inc.tx.Add(rc.element())
		}
	}
	for _, c := range inc.changes {
		if c.rec == nil {
			continue
		}
		had := entryValues(c.was)
		for i := range c.objs.entries {
			if e := &c.objs.entries[i]; !hasValue(had, e) {
				inc.tx.Add(e.element())
			}
		}
	}
	for _, id := range sortedKeys(inc.hairpinKeys) {
		if inc.hairpin[id] > 0 && inc.st.hairpinRefs[id] <= 0 {
			inc.tx.Add(inc.hairpinKeys[id].element())
		}
	}
}

// retire is step 5: what changed Services no longer use goes, record chains first, which may
// name maps that go.
func (inc *incremental) retire() {
	flush := func(name string) {
		inc.tx.Flush(&ruleset.Chain{Name: name})
		inc.stale[name] = inc.now
	}
	for _, c := range inc.oldRecord {
		flush(c.name)
	}
	for _, c := range inc.changes {
		if c.old == nil {
			continue
		}
		var nowChains, nowMaps map[string]bool
		if c.rec != nil {
			nowChains, nowMaps = toSet(c.rec.chains), toSet(affinityNames(c.rec.affinity))
		}
		for _, name := range c.old.chains {
			if !nowChains[name] {
				flush(name)
			}
		}
		for _, m := range c.old.affinity {
			if !nowMaps[m.addr] {
				for _, decl := range affinityMapDecls(m, 0, inc.pl.fam) {
					inc.tx.Delete(&ruleset.Set{Name: decl.Name, Key: decl.Key, Data: decl.Data})
				}
			}
		}
	}
	for _, name := range sortedKeys(inc.pickRefs) {
		if inc.pickRefs[name] > 0 {
			continue
		}
		if inc.st.pickRefs[name] > 0 {
			flush(name)
			if isClusterPick(name) {
				// The dispatch rule naming it went above, in this transaction.
				inc.tx.Delete(&ruleset.Set{Name: name})
			}
		}
		delete(inc.pickRefs, name)
	}
}

// forget is step 6: the clients of endpoints that went are deleted, and the second looks due
// after this sync worked out.
func (inc *incremental) forget(view kernelView) map[string]forgetDue {
	targets, fresh, settled := forgetTargets(inc.st, inc.changes, inc.now)
	planForget(&inc.tx, targets, view)
	return nextForgetDue(inc.st, targets, fresh, settled, inc.now, inc.pl.opts.StaleChainDelay)
}

func (pl *planner) staleDue(st *state, now time.Time) bool {
	for _, since := range st.staleChains {
		if now.Sub(since) >= pl.opts.StaleChainDelay {
			return true
		}
	}
	return false
}

// renderWritten renders a written Service's objects again, as they were written: rendering is
// a pure function of the normalized Service and the family.
func (pl *planner) renderWritten(rec *serviceRecord) *serviceObjects {
	if rec == nil {
		return nil
	}
	objs := renderService(&rec.svc, pl.fam)
	return &objs
}

// hasValue says whether written holds e under its key with its value and comment.
func hasValue(written map[entryID]entryWritten, e *mapEntry) bool {
	v, ok := written[e.id()]
	return ok && v == e.written()
}

func entryValues(objs *serviceObjects) map[entryID]entryWritten {
	if objs == nil {
		return nil
	}
	out := make(map[entryID]entryWritten, len(objs.entries))
	for _, e := range objs.entries {
		out[e.id()] = e.written()
	}
	return out
}

// affinityNames lists the address maps of pairs: each pair is named by its address map.
func affinityNames(maps []affinityMap) []string {
	out := make([]string, len(maps))
	for i, m := range maps {
		out[i] = m.addr
	}
	return out
}

func toSet(names []string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}
