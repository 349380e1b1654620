package dataplane

import (
	"strconv"
	"strings"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Ports without ClientIP affinity pick their endpoint through chains and maps shared by every
// Service, so a Service costs the table set and map elements only, no chain, rule or set of its
// own (shown for TCP; UDP and SCTP have their own maps and chains):
//
//	cluster-ports:          clusterIP . tcp . port        (every such port; then goto cluster-dispatch)
//	cluster-dispatch:       masquerade per policy, then one rule per pick chain in use:
//	                        clusterIP . proto . port in the set named as the chain -> goto it
//	pick-cluster-tcp-N:     (a set) the cluster IP ports whose endpoints fill N indexes; and
//	                        (a chain) dnat to (daddr . dport . numgen random mod N) map @cluster-endpoints-tcp
//	service-nodeports:      tcp . nodePort                -> goto pick-nodeport-tcp-N (or pick-local-tcp-N)
//	pick-nodeport-tcp-N:    masquerade, then dnat to (dport . numgen random mod N) map @nodeport-endpoints-tcp
//	pick-local-tcp-N:       the same without masquerade (externalTrafficPolicy: Local)
//	cluster-endpoints-tcp:  clusterIP . port . i           -> endpoint address . port, i < N
//	nodeport-endpoints-tcp: nodePort . i                   -> endpoint address . port, i < N
//
// N is the number of elements the port's endpoints fill (their weights), so there is one pick
// chain per protocol and N in use, not per Service; a new connection takes one lookup to pick
// its endpoint whatever the number of endpoints.
//
// Why shared: the kernel finds a set by name with a walk of the table's set list, and every
// element added and every rule naming a set pays that walk, so a map per Service made each
// change cost more the more Services there were (10,000 maps: 41 ms to add one Service, mostly
// that walk). And the kernel walks all of a map's elements each time a rule in another chain
// starts using it, which is why the maps are used from the few pick chains only, and why a full
// sync writes those chains before any element.
//
// Why cluster IPs go through sets, not a verdict map: whenever a transaction adds a jump or
// goto, to a verdict map or in a rule, the kernel checks the whole table for loops, and that
// check visits every element of every verdict map and the chain it leads to. With one verdict
// map element per cluster IP port, adding a Service cost the kernel a walk of all of them
// (11 ms at 50,000 Services, against 0.2 ms for an element of a plain set). A plain set's
// element is not checked, so a Service added to a pick chain in use is only set and map
// elements. The dispatch chain's rules change only when a pick chain comes or goes. The price
// is a lookup per pick chain in use for a new connection to a cluster IP (the cluster-ports
// lookup keeps it off every other connection); pick chains are per distinct endpoint count,
// a few dozen at most on a real node. NodePorts keep their verdict map: at most one element
// per port of the NodePort range, whatever the number of Services.
//
// Why per protocol: the value's port must be spelled with a protocol for nft to accept the
// map back from the kernel in a later transaction ("th dport" there is refused as conflicting
// with the address), and nft then makes the rule match that protocol only.
//
// The Syncer counts the Services using each pick chain: it writes a chain (and, for cluster
// IPs, its set and the dispatch rules) when its first user comes and retires it, as it retires
// a Service's own chains, when its last one goes.

// pickKind is which traffic a pick chain serves.
type pickKind string

const (
	pickCluster  pickKind = "cluster"  // to a cluster IP; masquerade per the pod CIDRs
	pickNodePort pickKind = "nodeport" // to a NodePort; always masquerade
	pickLocal    pickKind = "local"    // to a NodePort with externalTrafficPolicy: Local; keep the source
)

var protocols = []Protocol{TCP, UDP, SCTP}

// sharedMapName is the shared map pick chains of kind and proto look endpoints up in.
func sharedMapName(kind pickKind, proto Protocol) string {
	if kind == pickCluster {
		return "cluster-endpoints-" + string(proto)
	}
	return "nodeport-endpoints-" + string(proto)
}

func pickChainName(kind pickKind, proto Protocol, n int) string {
	return "pick-" + string(kind) + "-" + string(proto) + "-" + strconv.Itoa(n)
}

// pickKey is the packet fields a pick chain of kind looks its endpoint up by, before the index.
func pickKey(kind pickKind, proto Protocol) []ruleset.Field {
	port := ruleset.Field{Kind: ruleset.Dport, Proto: rsProto(proto)}
	if kind == pickCluster {
		return []ruleset.Field{{Kind: ruleset.DAddr}, port}
	}
	return []ruleset.Field{port}
}

// pickChain is the shared chain that sends kind's proto traffic to one of n map elements.
func pickChain(kind pickKind, proto Protocol, n int) chainContent {
	dnat := stmts(protoIs(proto), &ruleset.DNATPick{Fields: pickKey(kind, proto), Mod: uint32(n), Map: sharedMapName(kind, proto)})
	c := chainContent{name: pickChainName(kind, proto, n)}
	switch kind {
	case pickCluster:
		c.rules = [][]ruleset.Stmt{dnat} // cluster-dispatch has masqueraded already
	case pickNodePort:
		c.rules = [][]ruleset.Stmt{stmts(jump(chainMarkMasquerade)), dnat}
	case pickLocal:
		c.rules = [][]ruleset.Stmt{dnat}
	}
	return c
}

// writeSharedMaps declares the shared endpoint maps of every protocol.
func writeSharedMaps(tx *txn) {
	for _, proto := range protocols {
		for _, kind := range []pickKind{pickCluster, pickNodePort} {
			keyOf := append(pickKey(kind, proto), ruleset.Field{Kind: ruleset.Numgen})
			dataOf := []ruleset.Field{{Kind: ruleset.DAddr}, {Kind: ruleset.Dport, Proto: rsProto(proto)}}
			tx.Add(&ruleset.Set{Name: sharedMapName(kind, proto), KeyOf: keyOf, DataOf: dataOf})
		}
	}
}

// renderPort adds what one port puts in the shared maps: the verdicts that lead its cluster IPs
// and NodePort to pick chains, and the elements those chains pick from. A port with ClientIP
// affinity leads them to chains of its own instead, which consult its clients first and then go
// on to the same pick chains (see affinity.go).
func renderPort(out *serviceObjects, svc *Service, p Port, fam family) {
	var own ownChains
	if svc.AffinityTimeout > 0 {
		own = renderAffinityChains(out, svc, p)
	}
	proto, port := ruleset.Proto(rsProto(p.Protocol)), ruleset.Port(p.Port)
	label := portComment(svc, p)
	for _, ip := range svc.ClusterIPs {
		key := keyOf(ruleset.Addr(ip), proto, port)
		switch {
		case len(p.Endpoints) == 0:
			out.entries = append(out.entries, mapEntry{mapName: setNoEndpointIPs, key: key, comment: label})
			continue
		case own.cluster != "":
			out.entries = append(out.entries, mapEntry{mapServiceIPs, key, entryValue{chain: own.cluster}, label})
		default:
			pick := out.pick(pickCluster, p, p.Endpoints)
			out.entries = append(out.entries, mapEntry{mapName: setClusterPorts, key: key, comment: label}, mapEntry{mapName: pick, key: key})
		}
		out.entries = appendPicks(out.entries, sharedMapName(pickCluster, p.Protocol), []ruleset.Value{ruleset.Addr(ip), port}, p.Endpoints)
	}
	if p.NodePort == 0 {
		return
	}
	nodePort := ruleset.Port(p.NodePort)
	key := keyOf(proto, nodePort)
	kind, external := externalPick(p)
	switch {
	case len(external) > 0:
		target := own.external
		if target == "" {
			target = out.pick(kind, p, external)
		}
		out.entries = append(out.entries, mapEntry{mapServiceNodePorts, key, entryValue{chain: target}, label})
		out.entries = appendPicks(out.entries, sharedMapName(kind, p.Protocol), []ruleset.Value{nodePort}, external)
	case p.ExternalLocal && len(p.Endpoints) > 0:
		// Endpoints exist elsewhere: dropping lets the client's load balancer health check move
		// it to another node, as kube-proxy does.
		out.entries = append(out.entries, mapEntry{mapName: setNoLocalPorts, key: key, comment: label})
	default:
		out.entries = append(out.entries, mapEntry{mapName: setNoEndpointPorts, key: key, comment: label})
	}
}

// externalPick is the kind of pick chain a port's NodePort uses, and the endpoints it picks from.
func externalPick(p Port) (pickKind, []Endpoint) {
	if p.ExternalLocal {
		return pickLocal, p.ExternalEndpoints
	}
	return pickNodePort, p.Endpoints
}

// pick returns the name of the pick chain for eps, noting it among the chains the Service needs.
func (o *serviceObjects) pick(kind pickKind, p Port, eps []Endpoint) string {
	name := pickChainName(kind, p.Protocol, totalWeight(eps))
	for _, have := range o.picks {
		if have.name == name {
			return name
		}
	}
	o.picks = append(o.picks, pickChain(kind, p.Protocol, totalWeight(eps)))
	return name
}

// appendPicks adds the elements key . i -> endpoint: an endpoint of weight w fills w consecutive
// indexes, so numgen, picking one index uniformly, sends it w of every N new connections.
func appendPicks(entries []mapEntry, mapName string, key []ruleset.Value, eps []Endpoint) []mapEntry {
	var k entryKey
	n := copy(k[:], key)
	i := 0
	for _, ep := range eps {
		value := entryValue{endpoint: ep.Addr}
		for range max(ep.Weight, 1) {
			k[n] = ruleset.Index(i)
			entries = append(entries, mapEntry{mapName: mapName, key: k, value: value})
			i++
		}
	}
	return entries
}

// isClusterPick tells a cluster IP pick chain, which has a set of the same name, from the others.
func isClusterPick(name string) bool {
	return strings.HasPrefix(name, "pick-"+string(pickCluster)+"-")
}

// writePick adds a pick chain and, for a cluster IP one, the set of ports that lead to it.
func writePick(tx *txn, c chainContent, fam family) {
	if isClusterPick(c.name) {
		tx.Add(&ruleset.Set{Name: c.name, Key: clusterPortKey(fam)})
	}
	writeChain(tx, c)
}

// writeDispatch writes the cluster-dispatch rules: the masquerade every cluster IP pick needs,
// then one rule for each cluster pick chain in use (names, sorted); after a flush of the old
// ones when flush is set.
func writeDispatch(tx *txn, names []string, flush bool) {
	if flush {
		tx.Flush(&ruleset.Chain{Name: chainClusterDispatch})
	}
	tx.Add(&ruleset.Rule{Chain: chainClusterDispatch, Stmts: stmts(jump(chainClusterMasq))})
	for _, name := range names {
		tx.Add(&ruleset.Rule{Chain: chainClusterDispatch, Stmts: stmts(lookup(name, clusterPortFields...), goTo(name))})
	}
}

// clusterPicksInUse lists, sorted, the cluster pick chains that refs counts users of.
func clusterPicksInUse(refs map[string]int) []string {
	var out []string
	for _, name := range sortedKeys(refs) {
		if refs[name] > 0 && isClusterPick(name) {
			out = append(out, name)
		}
	}
	return out
}

// writeChain adds a chain and its rules.
func writeChain(tx *txn, c chainContent) {
	tx.Add(&ruleset.Chain{Name: c.name})
	for _, r := range c.rules {
		tx.Add(&ruleset.Rule{Chain: c.name, Stmts: r})
	}
}
