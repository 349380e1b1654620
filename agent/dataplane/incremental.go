package dataplane

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
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

// planIncremental writes only what differs from memory. The transaction is
// ordered so that it is valid whatever mix of changes it carries:
//
//  1. delete map elements that go away or change value (before any add of
//     the same key), and hairpin elements no Service needs any more;
//  2. delete chains that have been stale long enough;
//  3. create sets and chains of changed Services, flush the ones that may
//     hold old rules, and write their rules;
//  4. add new map and hairpin elements (their target chains exist now);
//  5. flush chains the changed Services no longer use (deleted later, see
//     Options.StaleChainDelay) and delete their unused affinity sets, after
//     the rules that referenced them are gone.
func (s *Syncer) planIncremental(tx *knftables.Transaction, desired []desiredService, now time.Time, stats *Stats) func() {
	var changes []change
	present := make(map[string]bool, len(desired))
	for i := range desired {
		d := &desired[i]
		present[d.key] = true
		old := s.written[d.key]
		if old != nil && old.fingerprint == d.fingerprint {
			continue
		}
		objs := renderService(&d.svc, s.fam)
		changes = append(changes, change{key: d.key, old: old, objs: &objs, rec: newRecord(d.fingerprint, &objs)})
	}
	stats.Changed = len(changes)
	for _, key := range sortedKeys(s.written) {
		if !present[key] {
			changes = append(changes, change{key: key, old: s.written[key]})
			stats.Removed++
		}
	}
	if len(changes) == 0 && !s.staleDue(now) {
		return func() {}
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
			if v, ok := keep[e.id()]; !ok || v != e.value {
				tx.Delete(e.element())
			}
		}
	}
	for _, id := range sortedKeys(hairpinKeys) {
		if refs[id] <= 0 && s.hairpinRefs[id] > 0 {
			tx.Delete(&knftables.Element{Set: setHairpin, Key: hairpinKeys[id]})
		}
	}

	// 2. stale chain deletions, unless a change brings the chain back
	wanted := map[string]bool{}
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

	// 3. sets, chains and rules
	for _, c := range changes {
		if c.objs == nil {
			continue
		}
		before := map[string]bool{}
		if c.old != nil {
			for _, name := range c.old.chains {
				before[name] = true
			}
		}
		writeServiceObjects(tx, c.objs, s.fam, func(name string) bool {
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
			if v, ok := had[e.id()]; !ok || v != e.value {
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
		var nowChains, nowSets map[string]bool
		if c.rec != nil {
			nowChains, nowSets = toSet(c.rec.chains), toSet(c.rec.sets)
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
	}

	for id, n := range refs {
		if n <= 0 {
			delete(refs, id)
		}
	}
	return func() {
		for _, c := range changes {
			if c.rec == nil {
				delete(s.written, c.key)
			} else {
				s.written[c.key] = c.rec
			}
		}
		s.hairpinRefs = refs
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
		out[e.id()] = e.value
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

// fingerprint digests everything rendering depends on, so an unchanged
// fingerprint means the Service's objects in the kernel are already right
// and need not even be rendered again.
func fingerprint(svc *Service) [32]byte {
	size := 64 + len(svc.Namespace) + len(svc.Name) + 17*len(svc.ClusterIPs)
	for _, p := range svc.Ports {
		size += 32 + len(p.Name) + 20*(len(p.Endpoints)+len(p.ExternalEndpoints))
	}
	buf := make([]byte, 0, size)
	str := func(s string) {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	num := func(n uint64) { buf = binary.AppendUvarint(buf, n) }
	endpoints := func(eps []Endpoint) {
		num(uint64(len(eps)))
		for _, ep := range eps {
			buf = append(buf, ep.Addr.Addr().AsSlice()...)
			num(uint64(ep.Addr.Port()))
			if ep.Local {
				num(1)
			} else {
				num(0)
			}
		}
	}
	str(svc.Namespace)
	str(svc.Name)
	num(uint64(svc.AffinityTimeout))
	num(uint64(len(svc.ClusterIPs)))
	for _, ip := range svc.ClusterIPs {
		buf = append(buf, ip.AsSlice()...)
	}
	num(uint64(len(svc.Ports)))
	for _, p := range svc.Ports {
		str(p.Name)
		str(string(p.Protocol))
		num(uint64(p.Port))
		num(uint64(p.NodePort))
		if p.ExternalLocal {
			num(1)
		} else {
			num(0)
		}
		endpoints(p.Endpoints)
		endpoints(p.ExternalEndpoints)
	}
	return sha256.Sum256(buf)
}
