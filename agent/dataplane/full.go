package dataplane

import (
	"sync"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// rendered is the table a full sync wants, as a rebuild writes it, and the state it leaves.
type rendered struct {
	// ops are the rebuild's transaction: the table deleted and added again, then body, every
	// object the table holds.
	ops, body        []ruleset.Op
	next             *state
	changed, removed int
}

// renderFull renders every Service into the whole table. The rebuild's "add; delete; add" of
// the table works whether or not it exists, and dropping it removes every leftover object,
// which a flush would keep. It reads st only to count the Services that go.
func (pl *planner) renderFull(st *state, desired []desiredService) *rendered {
	sortByKey(desired) // the same input always gives the same transaction
	tx := &txn{}
	tx.Add(&ruleset.Table{})
	tx.Delete(&ruleset.Table{})
	tx.Add(&ruleset.Table{Comment: tableComment})
	writeBase(tx, pl.fam, &pl.opts)

	next := newState()
	objs := make([]serviceObjects, len(desired))
	entries := make([]int, len(desired))
	for i := range desired {
		// The transaction renders the elements again as the backend reads them (see
		// entriesRun): every Service's at once would be the table twice over, at its largest
		// moment (see docs/agent.md, Memory). Only their number is kept here.
		buf := entryBuffers.get()
		objs[i] = renderServiceInto(&desired[i].svc, pl.fam, *buf)
		entries[i] = len(objs[i].entries)
		*buf, objs[i].entries = objs[i].entries, nil
		entryBuffers.put(buf)
		// Pick chains before any element: a chain that starts using a map makes the kernel
		// walk the map's elements (see pick.go).
		for _, c := range objs[i].picks {
			if next.pickRefs[c.name]++; next.pickRefs[c.name] == 1 {
				writePick(tx, c, pl.fam)
			}
		}
	}
	writeDispatch(tx, clusterPicksInUse(next.pickRefs), false)
	pl.writeFullServices(tx, &next, desired, objs, entries)
	return &rendered{ops: tx.ops, body: tx.ops[3:], next: &next, changed: len(desired),
		removed: countRemoved(st.written, desired)}
}

const tableComment = "fleetslice node agent: Service load balancing"

// planRebuild deletes and recreates the table, for the reason given.
func planRebuild(r *rendered, reason string) *plan {
	return &plan{ops: r.ops, changed: r.changed, removed: r.removed, pending: &pending{full: r.next}, rebuilt: reason}
}

// writeFullServices writes every Service's chains, then their maps and rules and the record
// chains, then every element, and fills next with what they wrote.
func (pl *planner) writeFullServices(tx *txn, next *state, desired []desiredService, rendered []serviceObjects, entries []int) {
	never := func(string) bool { return false }
	// Every chain before any content: see writeServiceChains.
	for i := range desired {
		writeServiceChains(tx, &rendered[i], never)
	}
	var affinity []affinityMap
	for i := range desired {
		affinity = append(affinity, rendered[i].affinity...)
	}
	recordPlan := next.records.plan(nil, affinity)
	recordChains := next.records.created(recordPlan)
	for _, c := range recordChains {
		tx.Add(&ruleset.Chain{Name: c.name})
	}
	for i := range desired {
		writeServiceContent(tx, &rendered[i], pl.fam)
	}
	for _, c := range recordChains { // they name the maps just written
		for _, r := range c.rules {
			tx.Add(&ruleset.Rule{Chain: c.name, Stmts: r})
		}
	}
	for _, rc := range recordPlan.changes {
		tx.Add(rc.element())
	}
	next.records.apply(recordPlan) // next is not the Syncer's yet
	hairpinKeys := map[string]hairpinKey{}
	for i := range desired {
		d, objs := &desired[i], &rendered[i]
		for _, k := range objs.hairpin {
			id := k.id()
			next.hairpinRefs[id]++
			hairpinKeys[id] = k
		}
		rec := newRecord(d, objs)
		if entries[i] > 0 {
			tx.Add(entriesRun(&rec.svc, pl.fam, entries[i]))
		}
		rec.slot = next.slots.take()
		next.written[d.key] = rec
		for _, c := range rec.claims {
			next.claimOwners[c] = d.key
		}
	}
	for _, id := range sortedKeys(hairpinKeys) {
		tx.Add(hairpinKeys[id].element())
	}
}

// entriesRun is the map elements of a written Service as a run the backend spells out as it
// reads it, rendered from the record's normalized Service, which nothing changes once written.
// Each read renders them into a reused buffer and yields one reused Element: a full sync reads
// every element of the table once or twice, and allocating them was most of what it
// allocated, so most of the collector's work during it.
func entriesRun(svc *Service, fam family, n int) *ruleset.Elements {
	return &ruleset.Elements{Count: n, Each: func(yield func(*ruleset.Element) bool) {
		buf := entryBuffers.get()
		defer entryBuffers.put(buf)
		entries := renderServiceInto(svc, fam, *buf).entries
		*buf = entries
		var sp entrySpeller
		for i := range entries {
			if !yield(sp.spell(&entries[i])) {
				return
			}
		}
	}}
}

// entryBuffers are the buffers full syncs render a Service's map elements into, reused from
// one Service to the next (and by nested reads, each its own).
var entryBuffers = entryPool{sync.Pool{New: func() any { return new([]mapEntry) }}}

type entryPool struct{ p sync.Pool }

func (p *entryPool) get() *[]mapEntry { return p.p.Get().(*[]mapEntry) }

// put gives buf back, emptied of what it rendered so that it keeps no Service's names alive.
func (p *entryPool) put(buf *[]mapEntry) {
	clear(*buf)
	*buf = (*buf)[:0]
	p.p.Put(buf)
}

func countRemoved(written map[string]*serviceRecord, desired []desiredService) int {
	still := 0
	for _, d := range desired {
		if written[d.key] != nil {
			still++
		}
	}
	return len(written) - still
}

func newRecord(d *desiredService, objs *serviceObjects) *serviceRecord {
	rec := &serviceRecord{fingerprint: d.fingerprint, raw: d.raw, claims: d.claims,
		affinity: objs.affinity, svc: d.svc}
	for _, c := range objs.picks {
		rec.picks = append(rec.picks, c.name)
	}
	rec.chains = make([]string, len(objs.chains))
	rec.chainSums = make([]uint64, len(objs.chains))
	for i, c := range objs.chains {
		rec.chains[i], rec.chainSums[i] = c.name, c.sum()
	}
	return rec
}

// pending is what a planned sync leaves in memory once the backend applied its transaction:
// a whole new state (full), or the edits of an incremental sync.
type pending struct {
	full *state
	// raw holds Services whose input differs from what was written only in order: the next
	// sync skips them at once.
	raw         map[string]uint64
	changes     []change
	edits       bool // the fields below replace state's
	hairpinRefs map[string]int
	pickRefs    map[string]int
	staleChains map[string]time.Time
	forgetDue   map[string]forgetDue
	records     recordPlan
}

// commit makes p the state; it runs only after the backend applied p's transaction.
func (st *state) commit(p *pending) {
	if p.full != nil {
		*st = *p.full
		return
	}
	for key, raw := range p.raw {
		st.written[key].raw = raw
	}
	for _, c := range p.changes {
		if c.old == nil {
			continue
		}
		for _, cl := range c.old.claims {
			if st.claimOwners[cl] == c.key {
				delete(st.claimOwners, cl)
			}
		}
		st.slots.give(c.old.slot)
	}
	for _, c := range p.changes {
		if c.rec == nil {
			delete(st.written, c.key)
			continue
		}
		c.rec.slot = st.slots.take()
		st.written[c.key] = c.rec
		for _, cl := range c.rec.claims {
			st.claimOwners[cl] = c.key
		}
	}
	if p.edits {
		st.hairpinRefs, st.pickRefs, st.staleChains, st.forgetDue = p.hairpinRefs, p.pickRefs, p.staleChains, p.forgetDue
		st.records.apply(p.records)
	}
}
