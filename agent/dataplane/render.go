package dataplane

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/knftables"
)

// chainContent is one chain the dataplane owns with its rules in order.
type chainContent struct {
	name  string
	rules []string
}

// sum digests the rules, so a later sync can tell that a chain it wrote is still right.
func (c chainContent) sum() uint64 {
	h := fnv.New64a()
	for _, r := range c.rules {
		h.Write([]byte(r))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// mapEntry is one element of a verdict map.
type mapEntry struct {
	mapName string
	key     []string
	value   string
}

func (e mapEntry) id() string { return e.mapName + " " + strings.Join(e.key, " . ") }

func (e mapEntry) element() *knftables.Element {
	return &knftables.Element{Map: e.mapName, Key: e.key, Value: []string{e.value}}
}

// serviceObjects is everything one Service contributes to the table.
type serviceObjects struct {
	chains  []chainContent
	sets    []string // affinity sets, all with the Service's timeout
	maps    []endpointMap
	timeout time.Duration
	entries []mapEntry
	// hairpin holds keys of the shared hairpin set; two Services may share
	// an endpoint, so the Syncer reference-counts them.
	hairpin [][]string
}

func (o *serviceObjects) addMap(m *endpointMap, entries []mapEntry) {
	if m != nil {
		o.maps = append(o.maps, *m)
		o.entries = append(o.entries, entries...)
	}
}

// renderService turns a normalized Service into nftables objects. The layout
// per port is:
//
//	service-ips:       clusterIP . proto . port  -> goto svc-…
//	service-nodeports: proto . nodePort          -> goto ext-…
//	svc-…: mark for masquerade per policy, then pick an endpoint at random
//	  in one lookup (see dispatch), through the map eps-…
//	ext-…: masquerade and goto svc-… (or, for ExternalLocal, pick a local one
//	  through xeps-…)
//	ep-…/aff-…: with ClientIP affinity, one chain and one timed set per
//	  endpoint: a known client goes straight back to its endpoint.
//
// Ports without endpoints get entries in the no-endpoint maps instead, which
// the filter chains turn into a reject.
func renderService(svc *Service, fam family) serviceObjects {
	var out serviceObjects
	affinity := svc.AffinityTimeout > 0
	if affinity {
		out.timeout = svc.AffinityTimeout
	}
	for _, p := range svc.Ports {
		proto, port := string(p.Protocol), strconv.Itoa(int(p.Port))
		svcChain := serviceChainName(svc, p)
		hasCluster := len(p.Endpoints) > 0
		if hasCluster {
			pick, m, entries := dispatch(svc, p, p.Endpoints, fam, endpointMapName(svc, p, false))
			out.chains = append(out.chains, chainContent{svcChain, append([]string{"jump " + chainClusterMasq}, pick...)})
			out.addMap(m, entries)
		}
		for _, ip := range svc.ClusterIPs {
			key := []string{ip.String(), proto, port}
			if hasCluster {
				out.entries = append(out.entries, mapEntry{mapServiceIPs, key, "goto " + svcChain})
			} else {
				out.entries = append(out.entries, mapEntry{mapNoEndpointIPs, key, verdictReject})
			}
		}

		external := p.Endpoints
		if p.ExternalLocal {
			external = p.ExternalEndpoints
		}
		if p.NodePort != 0 {
			key := []string{proto, strconv.Itoa(int(p.NodePort))}
			switch {
			case len(external) > 0:
				extChain := externalChainName(svc, p)
				var rules []string
				if p.ExternalLocal {
					var m *endpointMap
					var entries []mapEntry
					rules, m, entries = dispatch(svc, p, external, fam, endpointMapName(svc, p, true))
					out.addMap(m, entries)
				} else {
					rules = []string{"jump " + chainMarkMasquerade, "goto " + svcChain}
				}
				out.chains = append(out.chains, chainContent{extChain, rules})
				out.entries = append(out.entries, mapEntry{mapServiceNodePorts, key, "goto " + extChain})
			case p.ExternalLocal && hasCluster:
				// Endpoints exist elsewhere: dropping lets the client's load
				// balancer health check move it to another node, as
				// kube-proxy does.
				out.entries = append(out.entries, mapEntry{mapNoEndpointPorts, key, verdictDrop})
			default:
				out.entries = append(out.entries, mapEntry{mapNoEndpointPorts, key, verdictReject})
			}
		}

		reachable := p.Endpoints
		if p.ExternalLocal && p.NodePort != 0 {
			reachable = unionEndpoints(p.Endpoints, p.ExternalEndpoints)
		}
		for _, ep := range reachable {
			if affinity {
				set := affinitySetName(svc, p, ep.Addr)
				out.sets = append(out.sets, set)
				out.chains = append(out.chains, chainContent{endpointChainName(svc, p, ep.Addr), []string{
					"update @" + set + " { " + fam.selector + " saddr }",
					"meta l4proto " + proto + " dnat " + fam.selector + " to " + fam.dnatTarget(ep.Addr),
				}})
			}
			if ep.Local {
				a, pt := ep.Addr.Addr().String(), strconv.Itoa(int(ep.Addr.Port()))
				out.hairpin = append(out.hairpin, []string{a, a, proto, pt})
			}
		}
	}
	return out
}

// dispatch spreads new connections over eps in proportion to their weights with one lookup,
// whatever their number: a single endpoint is one dnat rule; several are one rule "dnat to
// numgen random mod N map @<mapName>" whose named map holds index -> address . port. With ClientIP affinity a known
// client first goes back to its endpoint (one rule per endpoint, as kube-proxy writes them)
// and a new one picks an endpoint chain through a named verdict map.
//
// The maps are named, not inline: every inline map is an anonymous set, which nft names
// "__map%d" and the kernel numbers by scanning every set of the table, so a full sync of
// 10,000 Services with inline maps took 11.6 s of kernel time against 5.5 s with named maps
// (nft -f in a scratch namespace). One map shared by all Services would be worse still: the
// kernel walks all elements of a data map each time another chain binds it. A named map also
// lets an endpoint change rewrite one element instead of the rule.
func dispatch(svc *Service, p Port, eps []Endpoint, fam family, mapName string) ([]string, *endpointMap, []mapEntry) {
	proto := string(p.Protocol)
	affinity := svc.AffinityTimeout > 0
	switch {
	case len(eps) == 1 && affinity:
		return []string{"goto " + endpointChainName(svc, p, eps[0].Addr)}, nil, nil
	case len(eps) == 1:
		return []string{"meta l4proto " + proto + " dnat " + fam.selector + " to " + fam.dnatTarget(eps[0].Addr)}, nil, nil
	}
	m := &endpointMap{name: mapName, verdict: affinity, protocol: p.Protocol}
	// An endpoint of weight w fills w consecutive elements: numgen picks one element
	// uniformly, so it receives w of every total-weight new connections.
	entries := make([]mapEntry, 0, totalWeight(eps))
	var rules []string
	for _, ep := range eps {
		value := ep.Addr.Addr().String() + " . " + strconv.Itoa(int(ep.Addr.Port()))
		if affinity {
			chain := endpointChainName(svc, p, ep.Addr)
			rules = append(rules, fam.selector+" saddr @"+affinitySetName(svc, p, ep.Addr)+" goto "+chain)
			value = "goto " + chain
		}
		for range max(ep.Weight, 1) {
			entries = append(entries, mapEntry{mapName, []string{strconv.Itoa(len(entries))}, value})
		}
	}
	mod := "numgen random mod " + strconv.Itoa(len(entries))
	if affinity {
		return append(rules, mod+" vmap @"+mapName), m, entries
	}
	return []string{"meta l4proto " + proto + " dnat " + fam.selector + " addr . port to " + mod + " map @" + mapName}, m, entries
}

// endpointMap is a Service port's map from a random index to an endpoint: its address and port,
// or (verdict) a goto to its affinity chain.
type endpointMap struct {
	name     string
	verdict  bool
	protocol Protocol
}

// typeOf is the map's type: the index is a numgen value, for which nft has no named type. The
// port is the protocol's own ("th dport" would do for a fresh table, but nft, reading the map
// back from the kernel on a later transaction, then sees "tcp" and "th" conflict).
func (m *endpointMap) typeOf(fam family) string {
	if m.verdict {
		return "numgen random mod 1 : verdict"
	}
	return "numgen random mod 1 : " + fam.selector + " daddr . " + string(m.protocol) + " dport"
}

func unionEndpoints(a, b []Endpoint) []Endpoint {
	out := append([]Endpoint(nil), a...)
	for _, ep := range b {
		found := false
		for _, have := range a {
			if have.Addr == ep.Addr {
				found = true
				break
			}
		}
		if !found {
			out = append(out, ep)
		}
	}
	return out
}

// writeBase adds the fixed skeleton of the table: hooks, dispatch maps and
// the masquerade and reject helpers. It is written only by full syncs.
func writeBase(tx *txn, fam family, opts *Options) {
	natType, filterType := knftables.NATType, knftables.FilterType
	base := func(name string, t knftables.BaseChainType, hook knftables.BaseChainHook, prio knftables.BaseChainPriority) {
		tx.Add(&knftables.Chain{Name: name, Type: &t, Hook: &hook, Priority: &prio})
	}
	base(chainNATPrerouting, natType, knftables.PreroutingHook, knftables.DNATPriority)
	base(chainNATOutput, natType, knftables.OutputHook, knftables.DNATPriority)
	base(chainNATPostrouting, natType, knftables.PostroutingHook, knftables.SNATPriority)
	base(chainFilterInput, filterType, knftables.InputHook, knftables.FilterPriority)
	base(chainFilterForward, filterType, knftables.ForwardHook, knftables.FilterPriority)
	base(chainFilterOutput, filterType, knftables.OutputHook, knftables.FilterPriority)
	for _, name := range []string{chainServices, chainEndpointChecks, chainNodePortChecks, chainReject,
		chainMasquerading, chainMarkMasquerade, chainClusterMasq} {
		tx.Add(&knftables.Chain{Name: name})
	}

	ipKey := fam.addrType + " . inet_proto . inet_service : verdict"
	portKey := "inet_proto . inet_service : verdict"
	tx.Add(&knftables.Map{Name: mapServiceIPs, Type: ipKey})
	tx.Add(&knftables.Map{Name: mapServiceNodePorts, Type: portKey})
	tx.Add(&knftables.Map{Name: mapNoEndpointIPs, Type: ipKey})
	tx.Add(&knftables.Map{Name: mapNoEndpointPorts, Type: portKey})
	tx.Add(&knftables.Set{Name: setHairpin, Type: fam.addrType + " . " + fam.addrType + " . inet_proto . inet_service"})

	ip := fam.selector
	notLoopback := "fib daddr type local " + ip + " daddr != " + fam.loopback
	rules := []struct{ chain, rule string }{
		{chainNATPrerouting, "jump " + chainServices},
		{chainNATOutput, "jump " + chainServices},
		{chainNATPostrouting, "jump " + chainMasquerading},
		{chainFilterInput, "ct state new jump " + chainEndpointChecks},
		{chainFilterInput, "ct state new jump " + chainNodePortChecks},
		{chainFilterForward, "ct state new jump " + chainEndpointChecks},
		{chainFilterOutput, "ct state new jump " + chainEndpointChecks},
		{chainServices, ip + " daddr . meta l4proto . th dport vmap @" + mapServiceIPs},
		{chainServices, notLoopback + " meta l4proto . th dport vmap @" + mapServiceNodePorts},
		{chainEndpointChecks, ip + " daddr . meta l4proto . th dport vmap @" + mapNoEndpointIPs},
		{chainNodePortChecks, notLoopback + " meta l4proto . th dport vmap @" + mapNoEndpointPorts},
		// A TCP reset is the clearest "connection refused"; other protocols
		// get the ICMP port-unreachable that reject sends by default.
		{chainReject, "meta l4proto tcp reject with tcp reset"},
		{chainReject, "reject"},
		{chainMarkMasquerade, fmt.Sprintf("meta mark set meta mark or %#x", opts.MasqueradeMark)},
		{chainMasquerading, fmt.Sprintf("meta mark and %#x != 0 meta mark set meta mark xor %#x masquerade fully-random",
			opts.MasqueradeMark, opts.MasqueradeMark)},
		{chainMasquerading, ip + " saddr . " + ip + " daddr . meta l4proto . th dport @" + setHairpin + " masquerade fully-random"},
	}
	cidrs := podCIDRsOf(opts.PodCIDRs, fam)
	if len(cidrs) > 0 {
		tx.Add(&knftables.Set{Name: setPodCIDRs, Type: fam.addrType, Flags: []knftables.SetFlag{knftables.IntervalFlag}})
		for _, c := range cidrs {
			tx.Add(&knftables.Element{Set: setPodCIDRs, Key: []string{c.String()}})
		}
		rules = append(rules, struct{ chain, rule string }{chainClusterMasq,
			ip + " saddr != @" + setPodCIDRs + " jump " + chainMarkMasquerade})
	} else {
		rules = append(rules, struct{ chain, rule string }{chainClusterMasq, "jump " + chainMarkMasquerade})
	}
	for _, r := range rules {
		tx.Add(&knftables.Rule{Chain: r.chain, Rule: r.rule})
	}
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

// writeServiceObjects adds a Service's sets, maps, chains (flushed first when they
// may hold old rules) and rules. Map entries are written separately so that
// all deletions of a sync can precede all additions.
func writeServiceObjects(tx *txn, objs *serviceObjects, fam family, mayExist func(string) bool) {
	for _, name := range objs.sets {
		timeout := objs.timeout
		tx.Add(&knftables.Set{
			Name: name, Type: fam.addrType, Timeout: &timeout,
			// The kernel marks sets updated from the packet path as dynamic;
			// declaring it up front keeps later adds of the same set valid.
			Flags: []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		})
	}
	for _, m := range objs.maps {
		tx.Add(&knftables.Map{Name: m.name, TypeOf: m.typeOf(fam)})
	}
	for _, c := range objs.chains {
		tx.Add(&knftables.Chain{Name: c.name})
		if mayExist(c.name) {
			tx.Flush(&knftables.Chain{Name: c.name})
		}
	}
	for _, c := range objs.chains {
		for _, r := range c.rules {
			tx.Add(&knftables.Rule{Chain: c.name, Rule: r})
		}
	}
}
