package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/nftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/netlinkenc"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// A port with ClientIP affinity remembers its clients in two maps filled by packets (see
// affinity.go). When one of its endpoints goes, the clients it served must pick again, as they
// do with kube-proxy, whose per-endpoint sets go with the endpoint; here their entries are found
// by reading the port's maps, and only those, and deleted in the sync's transaction.
//
// The maps are read before the sync plans (readKernel), so that the plan is a function of what
// the Syncer remembers and what was read. A connection set up between the read and the
// transaction can still record a client with the endpoint that goes. Nothing can record it after
// the transaction, so the Syncer reads the map once more a StaleChainDelay later (the sync that
// deletes stale chains; Stats.CleanupAt asks for it), and deletes what it finds then.

// clientEntry is one entry of an affinity map: a client address and its endpoint's address or
// port.
type clientEntry struct {
	client netip.Addr
	value  ruleset.Value
}

// kernelView is what the kernel must tell a plan, read before planning: the entries of the
// affinity maps it forgets clients in, by map name, and for a full sync the table (see
// image.go), or why the sync rebuilds it without looking.
type kernelView struct {
	clients map[string][]clientEntry
	table   *tableImage
	spell   speller
	rebuild string
}

// forgetTarget is a pair of affinity maps to read, with the endpoints their entries may keep.
type forgetTarget struct {
	service string // the key of the Service that owns the maps
	maps    affinityMap
}

// readKernel reads what a plan of targets needs, in a stable order.
func readKernel(ctx context.Context, back Backend, targets map[string]forgetTarget) (kernelView, error) {
	view := kernelView{clients: map[string][]clientEntry{}}
	for _, name := range sortedKeys(targets) {
		m := targets[name].maps
		for _, mapName := range []string{m.addr, m.port} {
			entries, err := back.clients(ctx, mapName)
			if err != nil {
				return kernelView{}, fmt.Errorf("dataplane: reading affinity map %s: %w", mapName, err)
			}
			view.clients[mapName] = entries
		}
	}
	return view, nil
}

// lostEndpoints reports whether was holds an endpoint that now lacks.
func lostEndpoints(was, now []netip.AddrPort) bool {
	for _, ep := range was {
		if !slices.Contains(now, ep) {
			return true
		}
	}
	return false
}

// forgetTargets lists the affinity maps a sync of changes must read: those of changed Services
// that lost an endpoint (fresh), and those read by an earlier sync whose second look is due. A
// second look whose maps have gone meanwhile, clients and all, is settled.
func forgetTargets(st *state, changes []change, now time.Time) (targets map[string]forgetTarget, fresh, settled []string) {
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
	for name, f := range st.forgetDue {
		if _, have := targets[name]; have || now.Before(f.due) {
			continue
		}
		rec, changed := after[f.service]
		if !changed {
			rec = st.written[f.service]
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

// planForget deletes, of each target pair of maps as view has them, the clients whose endpoint
// the port no longer has (or whose entries are half gone: one timed out before the other). Each
// entry is added before it is deleted: it can time out between the read and the transaction,
// and deleting a missing element would fail the whole transaction.
func planForget(tx *txn, targets map[string]forgetTarget, view kernelView) {
	for _, name := range sortedKeys(targets) {
		m := targets[name].maps
		portOf := map[string]clientEntry{}
		for _, e := range view.clients[m.port] {
			portOf[e.client.String()] = e
		}
		forget := func(mapName string, e clientEntry) {
			key := []ruleset.Value{ruleset.Addr(e.client)}
			tx.Add(&ruleset.Element{Set: mapName, Map: true, Key: key, Value: []ruleset.Value{e.value}})
			tx.Delete(&ruleset.Element{Set: mapName, Map: true, Key: key})
		}
		for _, e := range view.clients[m.addr] {
			client := e.client.String()
			port, ok := portOf[client]
			delete(portOf, client)
			if ok && slices.Contains(m.endpoints, netip.AddrPortFrom(e.value.Addr, uint16(port.value.Num))) {
				continue
			}
			forget(m.addr, e)
			if ok {
				forget(m.port, port)
			}
		}
		for _, client := range sortedKeys(portOf) { // a port without its address: useless
			forget(m.port, portOf[client])
		}
	}
}

// nextForgetDue is forgetDue after a sync that read targets, fresh among them for a lost
// endpoint: those get their second look later; the others, and the settled, have had it.
func nextForgetDue(st *state, targets map[string]forgetTarget, fresh, settled []string, now time.Time,
	delay time.Duration) map[string]forgetDue {
	next := make(map[string]forgetDue, len(st.forgetDue)+len(fresh))
	for name, f := range st.forgetDue {
		if _, read := targets[name]; !read && !slices.Contains(settled, name) {
			next[name] = f
		}
	}
	for _, name := range fresh {
		next[name] = forgetDue{service: targets[name].service, due: now.Add(delay)}
	}
	return next
}

// forgetDue is a second look at an affinity map, owned by service, due at due.
type forgetDue struct {
	service string
	due     time.Time
}

func forgetIsDue(st *state, now time.Time) bool {
	for _, f := range st.forgetDue {
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
		entry, err := parseClient(e.Key, e.Value)
		if err != nil {
			return nil, fmt.Errorf("affinity map %s: %w", name, err)
		}
		out = append(out, entry)
	}
	return out, nil
}

// parseClient reads an entry as nft lists it: a client address, and an address or a port.
func parseClient(key, value []string) (clientEntry, error) {
	k, v := strings.Join(key, " . "), strings.Join(value, " . ")
	client, err := netip.ParseAddr(k)
	if err != nil {
		return clientEntry{}, fmt.Errorf("entry %q : %q: %w", k, v, err)
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return clientEntry{client, ruleset.Addr(a)}, nil
	}
	port, err := strconv.ParseUint(v, 10, 16)
	if err != nil {
		return clientEntry{}, fmt.Errorf("entry %q : %q: %w", k, v, err)
	}
	return clientEntry{client, ruleset.Port(uint16(port))}, nil
}

// clients lists an affinity map over netlink. The map need not be one this backend wrote (a new
// backend on a programmed table reads the maps it finds): an entry's key is a client address and
// its value an address or a port, told apart by their lengths.
func (b *netlinkBackend) clients(ctx context.Context, name string) ([]clientEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	conn, err := b.conn()
	if err != nil {
		return nil, err
	}
	elems, err := conn.GetSetElements(&nftables.Set{Table: b.table, Name: name})
	if err != nil {
		return nil, err
	}
	addrType := nftables.TypeIPAddr
	if b.fam.rs == ruleset.IPv6 {
		addrType = nftables.TypeIP6Addr
	}
	out := make([]clientEntry, 0, len(elems))
	for _, e := range elems {
		valueType := nftables.TypeInetService
		if len(e.Val) == int(addrType.Bytes) {
			valueType = addrType
		}
		client, err1 := netlinkenc.Decode(addrType, e.Key)
		value, err2 := netlinkenc.Decode(valueType, e.Val)
		if err1 != nil || err2 != nil || len(e.Key) != int(addrType.Bytes) {
			return nil, fmt.Errorf("affinity map %s: undecodable entry %x : %x", name, e.Key, e.Val)
		}
		out = append(out, clientEntry{client.Addr, value})
	}
	return out, nil
}
