package dataplane

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/knftables"
)

// change is one Service whose objects a sync rewrites or removes.
type change struct {
	key  string
	old  *serviceRecord // nil for a new Service
	objs *serviceObjects
	rec  *serviceRecord // nil for a removed Service
}

// planIncremental writes only what differs from memory: desired are the Services to (re)write,
// removed the keys of written ones to delete. The transaction is
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
func (s *Syncer) planIncremental(ctx context.Context, tx *txn, desired []desiredService, removed []string, now time.Time,
	stats *Stats) (func(), error) {
	var changes []change
	var sameButReordered []*desiredService
	for i := range desired {
		d := &desired[i]
		old := s.written[d.key]
		if old != nil && old.fingerprint == d.fingerprint {
			sameButReordered = append(sameButReordered, d)
			continue
		}
		objs := renderService(&d.svc, s.fam)
		changes = append(changes, change{key: d.key, old: old, objs: &objs, rec: newRecord(d, &objs)})
	}
	// Input that differs only in order renders the same objects; remember
	// its raw form so the next sync skips it at once.
	rememberRaw := func() {
		for _, d := range sameButReordered {
			s.written[d.key].raw = d.raw
		}
	}
	stats.Changed = len(changes)
	for _, key := range removed {
		changes = append(changes, change{key: key, old: s.written[key]})
		stats.Removed++
	}
	slices.SortFunc(changes, func(a, b change) int { return cmp.Compare(a.key, b.key) })
	if len(changes) == 0 && !s.staleDue(now) && !s.forgetIsDue(now) {
		return rememberRaw, nil
	}

	refs := maps.Clone(s.hairpinRefs)
	hairpinKeys := map[string][]string{}
	for _, c := range changes {
		if c.old != nil {
			for _, k := range c.old.hairpin {
				id := strings.Join(k, " . ")
				refs[id]--
				hairpinKeys[id] = k
			}
		}
		if c.rec != nil {
			for _, k := range c.rec.hairpin {
				id := strings.Join(k, " . ")
				refs[id]++
				hairpinKeys[id] = k
			}
		}
	}

	var gone, come []affinityMap
	for _, c := range changes {
		if c.old != nil {
			gone = append(gone, c.old.affinity...)
		}
		if c.rec != nil {
			come = append(come, c.rec.affinity...)
		}
	}
	records := s.records.plan(gone, come, s.fam)
	newRecordChains, retiredRecordChains := s.records.created(records), s.records.retired(records)

	// 1. element deletions
	for _, rc := range records.changes {
		if rc.was != nil {
			tx.Delete(&knftables.Element{Map: mapAffinityEndpoints, Key: rc.key})
		}
	}
	for _, c := range changes {
		if c.old == nil {
			continue
		}
		keep := entryValues(c.rec)
		for _, e := range c.old.entries {
			if v, ok := keep[e.id()]; !ok || v != e.written() {
				tx.Delete(e.element())
			}
		}
	}
	for _, id := range sortedKeys(hairpinKeys) {
		if refs[id] <= 0 && s.hairpinRefs[id] > 0 {
			tx.Delete(&knftables.Element{Set: setHairpin, Key: hairpinKeys[id]})
		}
	}

	pickRefs := maps.Clone(s.pickRefs)
	for _, c := range changes {
		if c.old != nil {
			for _, name := range c.old.picks {
				pickRefs[name]--
			}
		}
		if c.rec != nil {
			for _, name := range c.rec.picks {
				pickRefs[name]++
			}
		}
	}

	// 2. stale chain deletions, unless a change brings the chain back
	wanted := map[string]bool{}
	for name, n := range pickRefs {
		if n > 0 {
			wanted[name] = true
		}
	}
	for _, c := range changes {
		if c.rec != nil {
			for _, name := range c.rec.chains {
				wanted[name] = true
			}
		}
	}
	for _, c := range newRecordChains {
		wanted[c.name] = true
	}
	stale := maps.Clone(s.staleChains)
	for _, name := range sortedKeys(s.staleChains) {
		switch {
		case wanted[name]:
			delete(stale, name)
		case now.Sub(s.staleChains[name]) >= s.opts.StaleChainDelay:
			tx.Delete(&knftables.Chain{Name: name})
			delete(stale, name)
		}
	}

	// 3. pick chains that get their first user (a retired one is flushed, so it gets its rules
	// again), then sets, maps, chains and rules; a chain whose rules are what they were, and a
	// map that exists already, are left alone, so that an endpoint change within a map is only
	// an element change.
	written := map[string]bool{}
	for _, c := range changes {
		if c.objs == nil {
			continue
		}
		for _, p := range c.objs.picks {
			if s.pickRefs[p.name] <= 0 && !written[p.name] {
				written[p.name] = true
				writePick(tx, p, s.fam)
			}
		}
	}
	// The dispatch rules change only when a cluster pick chain comes or goes; they name the
	// chains and sets just written, and drop those retired below.
	if inUse := clusterPicksInUse(pickRefs); !slices.Equal(inUse, clusterPicksInUse(s.pickRefs)) {
		writeDispatch(tx, inUse, s.fam, true)
	}
	for _, c := range changes {
		if c.objs == nil {
			continue
		}
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
		writeServiceObjects(tx, &objs, s.fam, func(name string) bool {
			_, isStale := s.staleChains[name]
			return before[name] || isStale
		})
	}

	// Record chains name the maps just written.
	for _, c := range newRecordChains {
		writeChain(tx, c)
	}

	// 4. element additions
	for _, rc := range records.changes {
		if rc.now != nil {
			tx.Add(&knftables.Element{Map: mapAffinityEndpoints, Key: rc.key, Value: []string{"goto " + rc.now.name}})
		}
	}
	for _, c := range changes {
		if c.rec == nil {
			continue
		}
		had := entryValues(c.old)
		for _, e := range c.rec.entries {
			if v, ok := had[e.id()]; !ok || v != e.written() {
				tx.Add(e.element())
			}
		}
	}
	for _, id := range sortedKeys(hairpinKeys) {
		if refs[id] > 0 && s.hairpinRefs[id] <= 0 {
			tx.Add(&knftables.Element{Set: setHairpin, Key: hairpinKeys[id]})
		}
	}

	// 5. retire what changed Services no longer use: record chains first, which may name maps
	// that go
	for _, c := range retiredRecordChains {
		tx.Flush(&knftables.Chain{Name: c.name})
		stale[c.name] = now
	}
	for _, c := range changes {
		if c.old == nil {
			continue
		}
		var nowChains, nowMaps map[string]bool
		if c.rec != nil {
			nowChains, nowMaps = toSet(c.rec.chains), toSet(affinityNames(c.rec.affinity))
		}
		for _, name := range c.old.chains {
			if !nowChains[name] {
				tx.Flush(&knftables.Chain{Name: name})
				stale[name] = now
			}
		}
		for _, m := range c.old.affinity {
			if !nowMaps[m.addr] {
				tx.Delete(&knftables.Map{Name: m.addr})
				tx.Delete(&knftables.Map{Name: m.port})
			}
		}
	}

	for _, name := range sortedKeys(pickRefs) {
		if pickRefs[name] <= 0 {
			if s.pickRefs[name] > 0 {
				tx.Flush(&knftables.Chain{Name: name})
				stale[name] = now
				if isClusterPick(name) {
					// The dispatch rule naming it went above, in this transaction.
					tx.Delete(&knftables.Set{Name: name})
				}
			}
			delete(pickRefs, name)
		}
	}

	// 6. forget clients
	targets, fresh, settled := s.forgetTargets(changes, now)
	if err := s.planForget(ctx, tx, targets); err != nil {
		return nil, err
	}
	forget := s.nextForgetDue(targets, fresh, settled, now)

	for id, n := range refs {
		if n <= 0 {
			delete(refs, id)
		}
	}
	return func() {
		rememberRaw()
		for _, c := range changes {
			if c.old != nil {
				for _, cl := range c.old.claims {
					if s.claimOwners[cl] == c.key {
						delete(s.claimOwners, cl)
					}
				}
			}
		}
		for _, c := range changes {
			if c.rec == nil {
				delete(s.written, c.key)
				continue
			}
			s.written[c.key] = c.rec
			for _, cl := range c.rec.claims {
				s.claimOwners[cl] = c.key
			}
		}
		s.hairpinRefs = refs
		s.pickRefs = pickRefs
		s.staleChains = stale
		s.forgetDue = forget
		s.records.apply(records)
	}, nil
}

func (s *Syncer) staleDue(now time.Time) bool {
	for _, since := range s.staleChains {
		if now.Sub(since) >= s.opts.StaleChainDelay {
			return true
		}
	}
	return false
}

func entryValues(rec *serviceRecord) map[string]string {
	if rec == nil {
		return nil
	}
	out := make(map[string]string, len(rec.entries))
	for _, e := range rec.entries {
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
