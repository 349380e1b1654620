package dataplane

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"sigs.k8s.io/knftables"
)

// A port with ClientIP affinity remembers its clients in two maps filled by packets (see
// affinity.go). When one of its endpoints goes, the clients it served must pick again, as they
// do with kube-proxy, whose per-endpoint sets go with the endpoint; here their entries are found
// by reading the port's maps, and only those, and deleted in the sync's transaction.
//
// A connection set up between the read and the transaction can still record a client with the
// endpoint that goes. Nothing can record it after the transaction, so the Syncer reads the map
// once more a StaleChainDelay later (the sync that deletes stale chains; Stats.CleanupAt asks
// for it), and deletes what it finds then.

// clientEntry is one entry of an affinity map as nft spells it: a client address and its
// endpoint's address or port.
type clientEntry struct {
	client string
	value  string
}

// forgetTarget is a pair of affinity maps to read, with the endpoints their entries may keep.
type forgetTarget struct {
	service string // the key of the Service that owns the maps
	maps    affinityMap
}

// lostEndpoints reports whether was holds an endpoint that now lacks.
func lostEndpoints(was, now []string) bool {
	for _, ep := range was {
		if !slices.Contains(now, ep) {
			return true
		}
	}
	return false
}

// forgetTargets lists the affinity maps this sync must read: those of changed Services that lost
// an endpoint (fresh), and those read by an earlier sync whose second look is due. A second look
// whose maps have gone meanwhile, clients and all, is settled.
func (s *Syncer) forgetTargets(changes []change, now time.Time) (targets map[string]forgetTarget, fresh, settled []string) {
	targets = map[string]forgetTarget{}
	after := map[string]*serviceRecord{} // a changed Service's record after this sync, nil if removed
	for _, c := range changes {
		after[c.key] = c.rec
		if c.old == nil || c.rec == nil {
			continue // a new Service has no clients; a removed one's maps go whole
		}
		for _, m := range c.rec.affinity {
			if old, ok := findAffinity(c.old, m.addr); ok && lostEndpoints(old.endpoints, m.endpoints) {
				targets[m.addr] = forgetTarget{c.key, m}
				fresh = append(fresh, m.addr)
			}
		}
	}
	for name, f := range s.forgetDue {
		if _, have := targets[name]; have || now.Before(f.due) {
			continue
		}
		rec, changed := after[f.service]
		if !changed {
			rec = s.written[f.service]
		}
		if m, ok := findAffinity(rec, name); ok {
			targets[name] = forgetTarget{f.service, m}
		} else {
			settled = append(settled, name)
		}
	}
	slices.Sort(fresh)
	return targets, fresh, settled
}

// findAffinity finds the pair of affinity maps named by its address map in rec, which may be nil.
func findAffinity(rec *serviceRecord, name string) (affinityMap, bool) {
	if rec == nil {
		return affinityMap{}, false
	}
	i := slices.IndexFunc(rec.affinity, func(m affinityMap) bool { return m.addr == name })
	if i < 0 {
		return affinityMap{}, false
	}
	return rec.affinity[i], true
}

// planForget reads each target pair of maps and deletes the clients whose endpoint the port no
// longer has (or whose entries are half gone: one timed out before the other). Each entry is
// added before it is deleted: it can time out between the read and the transaction, and deleting
// a missing element would fail the whole transaction.
func (s *Syncer) planForget(ctx context.Context, tx *txn, targets map[string]forgetTarget) error {
	for _, name := range sortedKeys(targets) {
		m := targets[name].maps
		addrs, err := s.back.clients(ctx, m.addr)
		if err != nil {
			return fmt.Errorf("dataplane: reading affinity map %s: %w", m.addr, err)
		}
		ports, err := s.back.clients(ctx, m.port)
		if err != nil {
			return fmt.Errorf("dataplane: reading affinity map %s: %w", m.port, err)
		}
		portOf := make(map[string]string, len(ports))
		for _, e := range ports {
			portOf[e.client] = e.value
		}
		forget := func(mapName, client, value string) {
			tx.Add(&knftables.Element{Map: mapName, Key: []string{client}, Value: []string{value}})
			tx.Delete(&knftables.Element{Map: mapName, Key: []string{client}})
		}
		for _, e := range addrs {
			port, ok := portOf[e.client]
			delete(portOf, e.client)
			if ok && slices.Contains(m.endpoints, e.value+" . "+port) {
				continue
			}
			forget(m.addr, e.client, e.value)
			if ok {
				forget(m.port, e.client, port)
			}
		}
		for _, client := range sortedKeys(portOf) { // a port without its address: useless
			forget(m.port, client, portOf[client])
		}
	}
	return nil
}

// nextForgetDue is forgetDue after a sync that read targets, fresh among them for a lost
// endpoint: those get their second look later; the others, and the settled, have had it.
func (s *Syncer) nextForgetDue(targets map[string]forgetTarget, fresh, settled []string, now time.Time) map[string]forgetDue {
	next := make(map[string]forgetDue, len(s.forgetDue)+len(fresh))
	for name, f := range s.forgetDue {
		if _, read := targets[name]; !read && !slices.Contains(settled, name) {
			next[name] = f
		}
	}
	for _, name := range fresh {
		next[name] = forgetDue{service: targets[name].service, due: now.Add(s.opts.StaleChainDelay)}
	}
	return next
}

// forgetDue is a second look at an affinity map, owned by service, due at due.
type forgetDue struct {
	service string
	due     time.Time
}

func (s *Syncer) forgetIsDue(now time.Time) bool {
	for _, f := range s.forgetDue {
		if !now.Before(f.due) {
			return true
		}
	}
	return false
}

// clients lists an affinity map through nft (or the fake, which packets never fill).
func (k knftablesBackend) clients(ctx context.Context, name string) ([]clientEntry, error) {
	elems, err := k.nft.ListElements(ctx, "map", name)
	if err != nil {
		return nil, err
	}
	out := make([]clientEntry, 0, len(elems))
	for _, e := range elems {
		out = append(out, clientEntry{strings.Join(e.Key, " . "), strings.Join(e.Value, " . ")})
	}
	return out, nil
}

// clients lists an affinity map over netlink and spells its entries as nft would.
func (b *netlinkBackend) clients(ctx context.Context, name string) ([]clientEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.sets[name]
	if d == nil || len(d.key) != 1 || len(d.data) != 1 {
		return nil, fmt.Errorf("no affinity map %q in table %s", name, TableName)
	}
	conn, err := b.conn()
	if err != nil {
		return nil, err
	}
	s := &nftables.Set{Table: b.table, Name: name}
	if err := d.describe(s); err != nil {
		return nil, err
	}
	elems, err := conn.GetSetElements(s)
	if err != nil {
		return nil, err
	}
	out := make([]clientEntry, 0, len(elems))
	for _, e := range elems {
		client, err1 := decodeField(d.key[0], e.Key)
		value, err2 := decodeField(d.data[0], e.Val)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("affinity map %s: undecodable entry %x : %x", name, e.Key, e.Val)
		}
		out = append(out, clientEntry{client, value})
	}
	return out, nil
}
