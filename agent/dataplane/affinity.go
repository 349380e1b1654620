package dataplane

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// A port with ClientIP affinity picks a new client's endpoint through the shared pick chains, as
// a port without affinity does; what it adds is a pair of maps of the clients it has seen, each
// entry timing out after the Service's timeout, and a chain of its own that consults them first:
//
//	service-ips:       clusterIP . proto . port  -> goto svc-…
//	service-nodeports: proto . nodePort          -> goto ext-…
//	svc-…:  masquerade per policy; a known client goes to its endpoint (dnat to the address in
//	        aff-… and the port in affp-…, one lookup each); a new one goes on to the pick chain
//	ext-…:  the same for the NodePort, masqueraded; with externalTrafficPolicy: Local, not
//	        masqueraded and with maps of its own (xaff-…, xaffp-…), so that a client is only
//	        ever sent to this node's endpoints
//
// The client is recorded on the way out (nat postrouting, before masquerading): by then NAT has
// given the connection its endpoint, and affinity-endpoints (endpoint address . proto . port ->
// goto rec-…) leads to a chain that updates the maps of every port with that endpoint. Endpoints
// recording in the same maps share one such chain, so a port costs two chains (three or four
// with a NodePort), two maps (four), and a lookup per new connection, whatever its number of
// endpoints; kube-proxy keeps a chain and a set per endpoint and tries them one by one.
//
// Why this shape, when kube-proxy's is simpler: every commit walks every chain of every table
// in the namespace (docs/agent.md), so a chain per endpoint made every sync slower. The endpoint
// is known only after NAT, and nft (1.0.6) can neither look a map up inside an `update` nor
// write an IPv6 address and port as one map value, hence two maps filled after NAT; and the
// agent's netlink library (google/nftables v0.3.0) cannot read back a rule that matches the
// connection's original destination, hence recording by endpoint. Recording by endpoint means
// that a client that reached an endpoint through another Service is remembered as its client
// by every affinity port of that endpoint too: a valid endpoint of the port, chosen earlier
// than kube-proxy would.
//
// As with kube-proxy, a client is remembered for the port whichever way it came (cluster IP or
// NodePort), except that a Local NodePort remembers its own. When an endpoint goes, its clients
// must pick again: the Syncer deletes their entries (see forget.go).

// affinityMap is a port's pair of client maps and the endpoints they may hold.
type affinityMap struct {
	addr, port string // the maps: client -> endpoint address, client -> endpoint port
	proto      Protocol
	// endpoints are the values the maps may hold together: clients recorded with any other
	// are forgotten.
	endpoints []netip.AddrPort
}

// ownChains names the chains a port with ClientIP affinity leads its cluster IPs and NodePort
// to; empty where it has none (no endpoints to send that traffic to).
type ownChains struct{ cluster, external string }

// renderAffinityChains adds a port's own chains and client maps (see above); renderPort leads
// the port's traffic to them.
func renderAffinityChains(out *serviceObjects, svc *Service, p Port) ownChains {
	var own ownChains
	clients := affinityMap{addr: affinityMapName(svc, p, false), port: affinityPortMapName(svc, p, false),
		proto: p.Protocol, endpoints: endpointValues(p.Endpoints)}
	if len(p.Endpoints) > 0 {
		own.cluster = serviceChainName(svc, p)
		out.affinity = append(out.affinity, clients)
		out.chains = append(out.chains, chainContent{own.cluster, [][]ruleset.Stmt{
			stmts(jump(chainClusterMasq)),
			knownClientRule(clients),
			stmts(goTo(out.pick(pickCluster, p, p.Endpoints))),
		}})
	}
	kind, external := externalPick(p)
	if p.NodePort == 0 || len(external) == 0 {
		return own
	}
	ext := chainContent{name: externalChainName(svc, p)}
	if p.ExternalLocal {
		local := affinityMap{addr: affinityMapName(svc, p, true), port: affinityPortMapName(svc, p, true),
			proto: p.Protocol, endpoints: endpointValues(external)}
		out.affinity = append(out.affinity, local)
		ext.rules = [][]ruleset.Stmt{knownClientRule(local)}
	} else { // external are the cluster's endpoints: their maps exist already
		ext.rules = [][]ruleset.Stmt{stmts(jump(chainMarkMasquerade)), knownClientRule(clients)}
	}
	ext.rules = append(ext.rules, stmts(goTo(out.pick(kind, p, external))))
	out.chains = append(out.chains, ext)
	own.external = ext.name
	return own
}

// knownClientRule sends a client the maps know to its endpoint; an unknown one falls through.
func knownClientRule(m affinityMap) []ruleset.Stmt {
	return stmts(protoIs(m.proto), &ruleset.DNATClient{AddrMap: m.addr, PortMap: m.port})
}

// recordRule remembers a new connection's client and the endpoint NAT gave it, and restarts the
// entries' timeout when the client was known.
func recordRule(m affinityMap) []ruleset.Stmt {
	client := ruleset.Field{Kind: ruleset.SAddr}
	return stmts(protoIs(m.proto),
		&ruleset.Update{Set: m.addr, Key: client, Data: ruleset.Field{Kind: ruleset.DAddr}},
		&ruleset.Update{Set: m.port, Key: client, Data: ruleset.Field{Kind: ruleset.Dport, Proto: rsProto(m.proto)}})
}

// writeAffinityMaps declares a port's two client maps.
func writeAffinityMaps(tx *txn, m affinityMap, timeout time.Duration, fam family) {
	for _, decl := range affinityMapDecls(m, timeout, fam) {
		tx.Add(decl)
	}
}

// affinityMapDecls are a port's two client maps: client -> endpoint address, client -> port.
func affinityMapDecls(m affinityMap, timeout time.Duration, fam family) []*ruleset.Set {
	// The kernel marks maps updated from the packet path as dynamic; declaring it up front
	// keeps later adds of the same map valid. The size bounds the clients of one port (a
	// kube-proxy set holds 65,535 per endpoint).
	flags := []ruleset.SetFlag{ruleset.Dynamic, ruleset.HasTimeout}
	key := []ruleset.Type{fam.addr}
	return []*ruleset.Set{
		{Name: m.addr, Key: key, Data: []ruleset.Type{fam.addr}, Timeout: timeout, Size: affinityMapSize, Flags: flags},
		{Name: m.port, Key: key, Data: []ruleset.Type{ruleset.InetService}, Timeout: timeout, Size: affinityMapSize, Flags: flags},
	}
}

const affinityMapSize = 1 << 20

// endpointValues lists endpoints as an affinity map pair's values.
func endpointValues(eps []Endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, len(eps))
	for i, ep := range eps {
		out[i] = ep.Addr
	}
	return out
}

// recordKey is an endpoint as affinity-endpoints keys it (address, protocol, port), and the
// key spelled as nft would, which orders the map's elements in a transaction.
func recordKey(m affinityMap, endpoint netip.AddrPort) (string, []ruleset.Value) {
	id := endpoint.Addr().String() + " . " + string(m.proto) + " . " + itoa(int(endpoint.Port()))
	return id, []ruleset.Value{ruleset.Addr(endpoint.Addr()), ruleset.Proto(rsProto(m.proto)), ruleset.Port(endpoint.Port())}
}

func itoa(n int) string { return strconv.Itoa(n) }

// recordings tracks, across Services, which affinity maps record each endpoint's clients: the
// element of affinity-endpoints for an endpoint leads to the chain of exactly those maps.
type recordings struct {
	byEndpoint map[string]map[string]affinityMap // endpoint key (see recordKey) -> address map -> maps
	chainRefs  map[string]int                    // record chain -> endpoints leading to it
}

func newRecordings() recordings {
	return recordings{byEndpoint: map[string]map[string]affinityMap{}, chainRefs: map[string]int{}}
}

// recordChange is what a sync does to one endpoint's element of affinity-endpoints.
type recordChange struct {
	key      []ruleset.Value
	was, now *chainContent // nil: no element before / after
}

func (rc recordChange) element() *ruleset.Element {
	el := &ruleset.Element{Set: mapAffinityEndpoints, Map: true, Key: rc.key}
	if rc.now != nil {
		el.Verdict = &ruleset.Verdict{Kind: ruleset.Goto, Chain: rc.now.name}
	}
	return el
}

// recordPlan is a sync's edit of recordings, applied once the kernel took the transaction.
type recordPlan struct {
	endpoints map[string]map[string]affinityMap // the endpoints edited, with their maps after
	refs      map[string]int                    // record chain -> change of its count
	chains    map[string]chainContent           // the record chains the changes name
	changes   []recordChange                    // sorted by endpoint
}

// plan works out what taking the maps gone away and adding the maps come does to the endpoints
// they hold, at a cost that follows them, not the table.
func (r *recordings) plan(gone, come []affinityMap) recordPlan {
	p := recordPlan{endpoints: map[string]map[string]affinityMap{}, refs: map[string]int{}, chains: map[string]chainContent{}}
	keys := map[string][]ruleset.Value{}
	edit := func(m affinityMap, add bool) {
		for _, ep := range m.endpoints {
			id, key := recordKey(m, ep)
			maps, ok := p.endpoints[id]
			if !ok {
				maps = make(map[string]affinityMap, len(r.byEndpoint[id])+1)
				for k, v := range r.byEndpoint[id] {
					maps[k] = v
				}
				p.endpoints[id], keys[id] = maps, key
			}
			if add {
				maps[m.addr] = m
			} else {
				delete(maps, m.addr)
			}
		}
	}
	for _, m := range gone {
		edit(m, false)
	}
	for _, m := range come {
		edit(m, true)
	}
	for _, id := range sortedKeys(keys) {
		was, now := chainOf(r.byEndpoint[id]), chainOf(p.endpoints[id])
		if was != nil && now != nil && was.name == now.name { // the name says which maps, so the rules
			continue
		}
		if was != nil {
			p.refs[was.name]--
			p.chains[was.name] = *was
		}
		if now != nil {
			p.refs[now.name]++
			p.chains[now.name] = *now
		}
		p.changes = append(p.changes, recordChange{key: keys[id], was: was, now: now})
	}
	return p
}

// created lists, sorted, the record chains the plan gives their first endpoint; retired those it
// takes the last one from.
func (r *recordings) created(p recordPlan) []chainContent { return r.crossing(p, true) }
func (r *recordings) retired(p recordPlan) []chainContent { return r.crossing(p, false) }

func (r *recordings) crossing(p recordPlan, up bool) []chainContent {
	var out []chainContent
	for _, name := range sortedKeys(p.refs) {
		before := r.chainRefs[name]
		after := before + p.refs[name]
		if (up && before <= 0 && after > 0) || (!up && before > 0 && after <= 0) {
			out = append(out, p.chains[name])
		}
	}
	return out
}

// apply records the plan.
func (r *recordings) apply(p recordPlan) {
	for id, maps := range p.endpoints {
		if len(maps) == 0 {
			delete(r.byEndpoint, id)
		} else {
			r.byEndpoint[id] = maps
		}
	}
	for name, d := range p.refs {
		if r.chainRefs[name] += d; r.chainRefs[name] <= 0 {
			delete(r.chainRefs, name)
		}
	}
}

// chainOf is the record chain of an endpoint recording in maps (by address map), nil for none:
// a rule per map, in the order of the names.
func chainOf(maps map[string]affinityMap) *chainContent {
	if len(maps) == 0 {
		return nil
	}
	names := sortedKeys(maps)
	rules := make([][]ruleset.Stmt, len(names))
	for i, name := range names {
		rules[i] = recordRule(maps[name])
	}
	return &chainContent{name: recordChainName(names), rules: rules}
}
