package dataplane

import (
	"slices"
	"sort"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// planFull plans a full sync from the table r wants and the one the kernel holds (view.table,
// read before planning): it writes only the difference, so that a table that has not changed
// costs no write at all and the affinity maps keep the clients packets put there, and it still
// repairs whatever anyone changed (the reason full syncs exist). It rebuilds the table instead
// when there is none, when it could not be read, or when it differs in a way no difference
// repairs: a chain whose hook changed, or a set whose type, flags or timeout did (the kernel
// changes neither in place, and replacing a set that rules name means rewriting those rules).
func (pl *planner) planFull(st *state, r *rendered, view kernelView, now time.Time) *plan {
	img := view.table
	switch {
	case view.rebuild != "":
		return planRebuild(r, view.rebuild)
	case img == nil:
		return planRebuild(r, "this backend cannot read its table back")
	case !img.exists:
		return planRebuild(r, "no table")
	}
	d := &tableDiff{delay: pl.opts.StaleChainDelay, st: st, img: img, sp: view.spell, now: now,
		stale: map[string]time.Time{}}
	if reason := d.compare(r.body); reason != "" {
		return planRebuild(r, reason)
	}
	tx := d.transaction()
	targets, fresh, settled := fullForgetTargets(st, r, img, now)
	planForget(&tx, targets, view)
	next := *r.next
	next.staleChains = d.stale
	next.forgetDue = nextForgetDue(st, targets, fresh, settled, now, pl.opts.StaleChainDelay)
	return &plan{ops: tx.ops, changed: r.changed, removed: r.removed, pending: &pending{full: &next},
		table: d.table(r.body)}
}

// tableDiff is a full sync's difference in the making. Its transaction is ordered so that it is
// valid whatever differs:
//
//  1. drop: delete the elements that differ or that the sync does not want, and flush the
//     interval sets that differ (they are refilled whole);
//  2. create: add the chains and sets that are missing, every chain before any rule;
//  3. rules: rewrite the chains whose rules differ (flushed, then their rules in order), pick
//     chains first as the rebuild writes them, so before any element of the maps they use
//     (see pick.go);
//  4. fill: add the elements that are missing or differ, whose chains exist by now;
//  5. retire: flush the chains the sync does not want, deleted a StaleChainDelay later as the
//     incremental syncs do (base chains, which nothing can jump to, and stale chains whose
//     delay is over go at once), then delete the sets the sync does not want, after the rules
//     that named them.
type tableDiff struct {
	delay                            time.Duration
	st                               *state
	img                              *tableImage
	sp                               speller
	now                              time.Time
	drop, create, rules, fill, clean txn
	chains, sets                     map[string]bool // wanted
	stale                            map[string]time.Time
}

func (d *tableDiff) transaction() txn {
	var tx txn
	for _, phase := range []txn{d.drop, d.create, d.rules, d.fill, d.clean} {
		tx.ops = append(tx.ops, phase.ops...)
	}
	return tx
}

// compare works out every phase from body, the objects a rebuild would write; a reason to
// rebuild instead, if any.
func (d *tableDiff) compare(body []ruleset.Op) string {
	w := indexBody(body)
	d.chains, d.sets = make(map[string]bool, len(w.chains)), make(map[string]bool, len(w.sets))
	spellers := make(map[string]setSpeller, len(w.sets))
	for _, o := range body {
		if o.Verb != ruleset.Add {
			continue
		}
		var reason string
		switch obj := o.Obj.(type) {
		case *ruleset.Chain:
			reason = d.createChain(obj)
		case *ruleset.Set:
			spellers[obj.Name], reason = d.createSet(obj)
		}
		if reason != "" {
			return reason
		}
	}
	for _, c := range w.chains {
		if reason := d.rewrite(c, w.rules[c.Name]); reason != "" {
			return reason
		}
	}
	if reason := d.compareElements(body, w.sets, spellers); reason != "" {
		return reason
	}
	d.retire()
	return ""
}

// bodyIndex is a rebuild's objects by kind, in the order it writes them, but for the elements:
// those are read from the body's runs as they are compared, since held at once they were the
// largest part of a full resync's memory.
type bodyIndex struct {
	chains []*ruleset.Chain
	rules  map[string][]*ruleset.Rule
	sets   []*ruleset.Set
}

func indexBody(body []ruleset.Op) bodyIndex {
	w := bodyIndex{rules: map[string][]*ruleset.Rule{}}
	for _, o := range body {
		switch obj := o.Obj.(type) {
		case *ruleset.Chain:
			w.chains = append(w.chains, obj)
		case *ruleset.Rule:
			w.rules[obj.Chain] = append(w.rules[obj.Chain], obj)
		case *ruleset.Set:
			w.sets = append(w.sets, obj)
		}
	}
	return w
}

// setCompare is one set's comparison while the body's elements stream by.
type setCompare struct {
	set   *ruleset.Set
	ss    setSpeller
	have  *setImage
	found int
	// kept holds the elements of an interval set, compared whole once all are read (these sets
	// are small: the Pod CIDRs).
	kept []*ruleset.Element
}

// compareElements compares every set's elements with the kernel's, one element of the body at a
// time: dynamic sets are skipped (packets fill them), sets the kernel lacks are filled, interval
// sets are compared whole, and the kernel's elements the sync does not want are found by a
// second read of the body, for the sets that hold any.
func (d *tableDiff) compareElements(body []ruleset.Op, sets []*ruleset.Set, spellers map[string]setSpeller) string {
	bySet := make(map[string]*setCompare, len(sets))
	for _, s := range sets {
		bySet[s.Name] = &setCompare{set: s, ss: spellers[s.Name], have: d.img.sets[s.Name]}
	}
	for o := range ruleset.All(body) {
		if e, ok := o.Obj.(*ruleset.Element); ok {
			if reason := d.element(bySet[e.Set], e); reason != "" {
				return reason
			}
		}
	}
	for _, s := range sets {
		c := bySet[s.Name]
		switch {
		case isDynamic(s) || c.have == nil:
		case slices.Contains(s.Flags, ruleset.Interval):
			if reason := d.intervals(s, c.ss, c.have, c.kept); reason != "" {
				return reason
			}
		case c.found != len(c.have.elems):
			if reason := d.dropUnwanted(s, c.ss, c.have, body); reason != "" {
				return reason
			}
		}
	}
	return ""
}

// element compares one element the sync wants with what the kernel holds under its key.
func (d *tableDiff) element(c *setCompare, e *ruleset.Element) string {
	switch {
	case c == nil:
		return "element of " + e.Set + ", a set the sync does not define"
	case isDynamic(c.set):
		return ""
	case c.have == nil:
		d.fill.Add(e.Clone()) // a run's element is valid only while it is read
		return ""
	case slices.Contains(c.set.Flags, ruleset.Interval):
		c.kept = append(c.kept, e.Clone())
		return ""
	}
	key, rest, err := c.ss.element(e)
	if err != nil {
		return "element of " + e.Set + ": " + err.Error()
	}
	had, ok := c.have.elems[key]
	if ok {
		c.found++
	}
	if ok && had != rest {
		d.drop.Delete(&ruleset.Element{Set: e.Set, Map: e.Map, Key: slices.Clone(e.Key)})
	}
	if !ok || had != rest {
		d.fill.Add(e.Clone())
	}
	return ""
}

func (d *tableDiff) createChain(c *ruleset.Chain) string {
	d.chains[c.Name] = true
	have := d.img.chains[c.Name]
	if have == nil {
		d.create.Add(c)
		return ""
	}
	def, err := d.sp.chain(c)
	switch {
	case err != nil:
		return "chain " + c.Name + ": " + err.Error()
	case def != have.def:
		return "chain " + c.Name + " has another type, hook or priority"
	}
	return ""
}

func (d *tableDiff) createSet(s *ruleset.Set) (setSpeller, string) {
	d.sets[s.Name] = true
	ss, err := d.sp.set(s)
	if err != nil {
		return nil, "set " + s.Name + ": " + err.Error()
	}
	have := d.img.sets[s.Name]
	switch {
	case have == nil:
		d.create.Add(s)
	case ss.def() != have.def:
		return nil, "set " + s.Name + " has another type, flags or timeout"
	}
	return ss, ""
}

// rewrite rewrites chain c when the kernel's rules are not rules.
func (d *tableDiff) rewrite(c *ruleset.Chain, rules []*ruleset.Rule) string {
	var have []string
	if h := d.img.chains[c.Name]; h != nil {
		have = h.rules
	}
	same := len(have) == len(rules)
	for i := 0; same && i < len(rules); i++ {
		spelled, err := d.sp.rule(rules[i].Stmts)
		if err != nil {
			return "chain " + c.Name + ": " + err.Error()
		}
		same = spelled == have[i]
	}
	if same {
		return ""
	}
	if len(have) > 0 {
		d.rules.Flush(&ruleset.Chain{Name: c.Name})
	}
	for _, r := range rules {
		d.rules.Add(r)
	}
	return ""
}

// dropUnwanted deletes the elements of s the kernel holds and the body does not.
func (d *tableDiff) dropUnwanted(s *ruleset.Set, ss setSpeller, have *setImage, body []ruleset.Op) string {
	want := map[string]bool{}
	for o := range ruleset.All(body) {
		if e, ok := o.Obj.(*ruleset.Element); ok && e.Set == s.Name {
			key, _, _ := ss.element(e) // spelled without error before
			want[key] = true
		}
	}
	for _, key := range sortedKeys(have.elems) {
		if want[key] {
			continue
		}
		vals, err := ss.values(key)
		if err != nil {
			return "an element of " + s.Name + " the sync does not want: " + err.Error()
		}
		d.drop.Delete(&ruleset.Element{Set: s.Name, Map: s.IsMap(), Key: vals})
	}
	return ""
}

// intervals refills an interval set whose ranges differ: a range someone added need not be a
// prefix the ruleset can name, and these sets are small.
func (d *tableDiff) intervals(s *ruleset.Set, ss setSpeller, have *setImage, elems []*ruleset.Element) string {
	same := len(elems) == len(have.elems)
	for _, e := range elems {
		key, _, err := ss.element(e)
		if err != nil {
			return "element of " + s.Name + ": " + err.Error()
		}
		_, ok := have.elems[key]
		same = same && ok
	}
	if same {
		return ""
	}
	d.drop.Flush(s)
	for _, e := range elems {
		d.fill.Add(e)
	}
	return ""
}

func isDynamic(s *ruleset.Set) bool {
	return s.Timeout != 0 || slices.Contains(s.Flags, ruleset.Dynamic) || slices.Contains(s.Flags, ruleset.HasTimeout)
}

// retire is phase 5 for the chains and sets the kernel holds and the sync does not want.
func (d *tableDiff) retire() {
	var gone []string
	for _, name := range sortedKeys(d.img.chains) {
		if d.chains[name] {
			continue
		}
		have := d.img.chains[name]
		since, stale := d.st.staleChains[name]
		if have.base || (stale && len(have.rules) == 0 && d.now.Sub(since) >= d.delay) {
			gone = append(gone, name)
			continue
		}
		if len(have.rules) > 0 {
			d.clean.Flush(&ruleset.Chain{Name: name})
		}
		if !stale {
			since = d.now
		}
		d.stale[name] = since
	}
	for _, name := range gone {
		d.clean.Delete(&ruleset.Chain{Name: name})
	}
	for _, name := range sortedKeys(d.img.sets) {
		if d.sets[name] {
			continue
		}
		s := &ruleset.Set{Name: name}
		if d.img.sets[name].isMap {
			s.Data = []ruleset.Type{ruleset.VerdictType} // a map: nft deletes maps and sets apart
		}
		d.clean.Delete(s)
	}
}

// table is what the table holds after the sync: body, and the chains left flushed.
func (d *tableDiff) table(body []ruleset.Op) []ruleset.Op {
	if len(d.stale) == 0 {
		return body
	}
	out := slices.Clip(body)
	for _, name := range sortedKeys(d.stale) {
		out = append(out, ruleset.Op{Verb: ruleset.Add, Obj: &ruleset.Chain{Name: name}})
	}
	return out
}

// fullForgetTargets lists the affinity maps a full sync reads and cleans: those forgetTargets
// finds from what the Syncer remembers (ports that lost an endpoint, second looks due), and
// those the kernel holds that the Syncer has no record of (a new Syncer on a programmed table,
// after an agent restart), whose clients may name endpoints the port no longer has; each of
// those gets a second look too. Maps the kernel does not hold are created empty: nothing to
// read, and a second look due on one is settled.
func fullForgetTargets(st *state, r *rendered, img *tableImage, now time.Time) (targets map[string]forgetTarget, fresh, settled []string) {
	keys := sortedKeys(r.next.written)
	changes := make([]change, 0, len(keys))
	known := map[string]bool{}
	for _, rec := range st.written {
		for _, m := range rec.affinity {
			known[m.addr] = true
		}
	}
	for _, key := range keys {
		changes = append(changes, change{key: key, old: st.written[key], rec: r.next.written[key]})
	}
	for key, old := range st.written {
		if r.next.written[key] == nil {
			changes = append(changes, change{key: key, old: old})
		}
	}
	targets, fresh, settled = forgetTargets(st, changes, now)
	for _, key := range keys {
		for _, m := range r.next.written[key].affinity {
			if !known[m.addr] {
				targets[m.addr] = forgetTarget{key, m}
				fresh = append(fresh, m.addr)
			}
		}
	}
	for name, t := range targets {
		if img.sets[t.maps.addr] == nil || img.sets[t.maps.port] == nil {
			delete(targets, name)
			if i := slices.Index(fresh, name); i >= 0 {
				fresh = slices.Delete(fresh, i, i+1)
			} else {
				settled = append(settled, name)
			}
		}
	}
	sort.Strings(fresh)
	sort.Strings(settled)
	return targets, fresh, settled
}
