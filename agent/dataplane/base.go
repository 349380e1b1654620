package dataplane

import (
	"net/netip"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Statement shorthands: the rules below read as their nft spelling does.
var (
	clusterPortFields = []ruleset.Field{{Kind: ruleset.DAddr}, {Kind: ruleset.L4Proto}, {Kind: ruleset.THDport}}
	nodePortFields    = []ruleset.Field{{Kind: ruleset.L4Proto}, {Kind: ruleset.THDport}}
)

func jump(chain string) ruleset.Stmt         { return &ruleset.Verdict{Kind: ruleset.Jump, Chain: chain} }
func goTo(chain string) ruleset.Stmt         { return &ruleset.Verdict{Kind: ruleset.Goto, Chain: chain} }
func stmts(s ...ruleset.Stmt) []ruleset.Stmt { return s }

func lookup(set string, fields ...ruleset.Field) ruleset.Stmt {
	return &ruleset.Lookup{Fields: fields, Set: set}
}

func protoIs(p Protocol) ruleset.Stmt {
	return &ruleset.Compare{Field: ruleset.Field{Kind: ruleset.L4Proto}, Value: ruleset.Proto(rsProto(p))}
}

// clusterPortKey is the type of the maps and sets keyed by a cluster IP port (service-ips,
// cluster-ports, each cluster pick chain's set).
func clusterPortKey(fam family) []ruleset.Type {
	return []ruleset.Type{fam.addr, ruleset.InetProto, ruleset.InetService}
}

var nodePortKey = []ruleset.Type{ruleset.InetProto, ruleset.InetService}

// writeBase adds the fixed skeleton of the table: hooks, dispatch maps and
// the masquerade and reject helpers. It is written only by full syncs.
func writeBase(tx *txn, fam family, opts *Options) {
	base := func(name string, t ruleset.ChainType, hook ruleset.Hook, prio ruleset.Priority) {
		tx.Add(&ruleset.Chain{Name: name, Base: &ruleset.BaseChain{Type: t, Hook: hook, Priority: prio}})
	}
	base(chainNATPrerouting, ruleset.NATChain, ruleset.Prerouting, ruleset.DNATPriority)
	base(chainNATOutput, ruleset.NATChain, ruleset.Output, ruleset.DNATPriority)
	base(chainNATPostrouting, ruleset.NATChain, ruleset.Postrouting, ruleset.SNATPriority)
	base(chainFilterInput, ruleset.FilterChain, ruleset.Input, ruleset.FilterPriority)
	base(chainFilterForward, ruleset.FilterChain, ruleset.Forward, ruleset.FilterPriority)
	base(chainFilterOutput, ruleset.FilterChain, ruleset.Output, ruleset.FilterPriority)
	for _, name := range []string{chainServices, chainEndpointChecks, chainNodePortChecks, chainReject,
		chainMasquerading, chainMarkMasquerade, chainClusterMasq, chainClusterDispatch, chainAffinityRecord} {
		tx.Add(&ruleset.Chain{Name: name})
	}
	writeBaseSets(tx, fam)
	cidrs := podCIDRsOf(opts.PodCIDRs, fam)
	if len(cidrs) > 0 {
		tx.Add(&ruleset.Set{Name: setPodCIDRs, Key: []ruleset.Type{fam.addr}, Flags: []ruleset.SetFlag{ruleset.Interval}})
		for _, c := range cidrs {
			tx.Add(&ruleset.Element{Set: setPodCIDRs, Key: []ruleset.Value{ruleset.Prefix(c)}})
		}
	}
	for _, r := range baseRules(fam, opts.MasqueradeMark, len(cidrs) > 0) {
		tx.Add(r)
	}
}

func writeBaseSets(tx *txn, fam family) {
	verdict := []ruleset.Type{ruleset.VerdictType}
	tx.Add(&ruleset.Set{Name: mapServiceIPs, Key: clusterPortKey(fam), Data: verdict})
	tx.Add(&ruleset.Set{Name: setClusterPorts, Key: clusterPortKey(fam)})
	tx.Add(&ruleset.Set{Name: mapServiceNodePorts, Key: nodePortKey, Data: verdict})
	tx.Add(&ruleset.Set{Name: mapAffinityEndpoints, Key: clusterPortKey(fam), Data: verdict})
	// Plain sets with a rule each, not verdict maps: adding an element to a verdict map makes the
	// kernel validate every chain reachable from the base chains (every verdict map element), so a
	// new Service, which has no endpoints until its EndpointSlice comes, cost more the larger the
	// table; a plain set's element is not validated.
	tx.Add(&ruleset.Set{Name: setNoEndpointIPs, Key: clusterPortKey(fam)})
	tx.Add(&ruleset.Set{Name: setNoEndpointPorts, Key: nodePortKey})
	tx.Add(&ruleset.Set{Name: setNoLocalPorts, Key: nodePortKey})
	tx.Add(&ruleset.Set{Name: setHairpin, Key: []ruleset.Type{fam.addr, fam.addr, ruleset.InetProto, ruleset.InetService}})
	writeSharedMaps(tx)
}

// baseRules are the rules of the skeleton's chains, in order.
func baseRules(fam family, mark uint32, podCIDRs bool) []*ruleset.Rule {
	notLoopback := func(rest ...ruleset.Stmt) []ruleset.Stmt {
		return append(stmts(&ruleset.FibDaddrLocal{},
			&ruleset.Compare{Field: ruleset.Field{Kind: ruleset.DAddr}, Invert: true, Value: ruleset.Prefix(fam.loopback)}), rest...)
	}
	newConn := &ruleset.CtStateNew{}
	hairpin := []ruleset.Field{{Kind: ruleset.SAddr}, {Kind: ruleset.DAddr}, {Kind: ruleset.L4Proto}, {Kind: ruleset.THDport}}
	rules := []*ruleset.Rule{
		{Chain: chainNATPrerouting, Stmts: stmts(jump(chainServices))},
		{Chain: chainNATOutput, Stmts: stmts(jump(chainServices))},
		// Recording a new connection's client needs the endpoint NAT gave it, so it happens on
		// the way out, before masquerading changes the source (see affinity.go).
		{Chain: chainNATPostrouting, Stmts: stmts(&ruleset.CtStatusDNAT{}, jump(chainAffinityRecord))},
		{Chain: chainNATPostrouting, Stmts: stmts(jump(chainMasquerading))},
		{Chain: chainAffinityRecord, Stmts: stmts(&ruleset.VerdictMap{Fields: clusterPortFields, Map: mapAffinityEndpoints})},
		{Chain: chainFilterInput, Stmts: stmts(newConn, jump(chainEndpointChecks))},
		{Chain: chainFilterInput, Stmts: stmts(newConn, jump(chainNodePortChecks))},
		{Chain: chainFilterForward, Stmts: stmts(newConn, jump(chainEndpointChecks))},
		{Chain: chainFilterOutput, Stmts: stmts(newConn, jump(chainEndpointChecks))},
		{Chain: chainServices, Stmts: stmts(&ruleset.VerdictMap{Fields: clusterPortFields, Map: mapServiceIPs})},
		{Chain: chainServices, Stmts: stmts(lookup(setClusterPorts, clusterPortFields...), goTo(chainClusterDispatch))},
		{Chain: chainServices, Stmts: notLoopback(&ruleset.VerdictMap{Fields: nodePortFields, Map: mapServiceNodePorts})},
		{Chain: chainEndpointChecks, Stmts: stmts(lookup(setNoEndpointIPs, clusterPortFields...), goTo(chainReject))},
		// A Local NodePort whose endpoints are all elsewhere drops: the client's load balancer
		// health check then moves it to another node, as with kube-proxy.
		{Chain: chainNodePortChecks, Stmts: notLoopback(lookup(setNoLocalPorts, nodePortFields...), &ruleset.Verdict{Kind: ruleset.Drop})},
		{Chain: chainNodePortChecks, Stmts: notLoopback(lookup(setNoEndpointPorts, nodePortFields...), goTo(chainReject))},
		// A TCP reset is the clearest "connection refused"; other protocols
		// get the ICMP port-unreachable that reject sends by default.
		{Chain: chainReject, Stmts: stmts(protoIs(TCP), &ruleset.Reject{TCPReset: true})},
		{Chain: chainReject, Stmts: stmts(&ruleset.Reject{})},
		{Chain: chainMarkMasquerade, Stmts: stmts(&ruleset.MarkSet{Bits: mark})},
		{Chain: chainMasquerading, Stmts: stmts(&ruleset.MarkTest{Mask: mark}, &ruleset.MarkSet{Bits: mark, Xor: true}, &ruleset.Masquerade{})},
		{Chain: chainMasquerading, Stmts: stmts(lookup(setHairpin, hairpin...), &ruleset.Masquerade{})},
	}
	if podCIDRs {
		return append(rules, &ruleset.Rule{Chain: chainClusterMasq, Stmts: stmts(
			&ruleset.Lookup{Fields: []ruleset.Field{{Kind: ruleset.SAddr}}, Set: setPodCIDRs, Invert: true}, jump(chainMarkMasquerade))})
	}
	return append(rules, &ruleset.Rule{Chain: chainClusterMasq, Stmts: stmts(jump(chainMarkMasquerade))})
}

func podCIDRsOf(prefixes []netip.Prefix, fam family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range prefixes {
		if p.IsValid() && fam.contains(p.Addr()) {
			out = append(out, p.Masked())
		}
	}
	return out
}
