package dataplane

import (
	"cmp"
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
//  3. create sets, endpoint maps and chains of changed Services, flush the ones that may
//     hold old rules, and write their rules;
//  4. add new map and hairpin elements (their target chains exist now);
//  5. flush chains the changed Services no longer use (deleted later, see
//     Options.StaleChainDelay) and delete their unused affinity sets and
//     endpoint maps, after the rules that referenced them are gone.
func (s *Syncer) planIncremental(tx *txn, desired []desiredService, removed []string, now time.Time, stats *Stats) func() {
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
	if len(changes) == 0 && !s.staleDue(now) {
		return rememberRaw
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

	// 1. element deletions
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
			objs.chains, objs.maps = nil, nil
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
			hadMaps := toSet(c.old.maps)
			for _, m := range c.objs.maps {
				if !hadMaps[m] {
					objs.maps = append(objs.maps, m)
				}
			}
		}
		writeServiceObjects(tx, &objs, s.fam, func(name string) bool {
			_, isStale := s.staleChains[name]
			return before[name] || isStale
		})
	}

	// 4. element additions
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

	// 5. retire what changed Services no longer use
	for _, c := range changes {
		if c.old == nil {
			continue
		}
		var nowChains, nowSets, nowMaps map[string]bool
		if c.rec != nil {
			nowChains, nowSets, nowMaps = toSet(c.rec.chains), toSet(c.rec.sets), toSet(c.rec.maps)
		}
		for _, name := range c.old.chains {
			if !nowChains[name] {
				tx.Flush(&knftables.Chain{Name: name})
				stale[name] = now
			}
		}
		for _, name := range c.old.sets {
			if !nowSets[name] {
				tx.Delete(&knftables.Set{Name: name})
			}
		}
		for _, name := range c.old.maps {
			if !nowMaps[name] {
				tx.Delete(&knftables.Map{Name: name})
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
	}
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

func toSet(names []string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}
