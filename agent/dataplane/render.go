package dataplane

import (
	"fmt"
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
	timeout time.Duration
	entries []mapEntry
	// hairpin holds keys of the shared hairpin set; two Services may share
	// an endpoint, so the Syncer reference-counts them.
	hairpin [][]string
}

// renderService turns a normalized Service into nftables objects. The layout
// per port is:
//
//	service-ips:       clusterIP . proto . port  -> goto svc-…
//	service-nodeports: proto . nodePort          -> goto ext-…
//	svc-…: mark for masquerade per policy, then pick an endpoint at random
//	ext-…: masquerade and goto svc-… (or, for ExternalLocal, pick a local one)
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
			rules := []string{"jump " + chainClusterMasq}
			rules = append(rules, dispatchRules(svc, p, p.Endpoints, fam)...)
			out.chains = append(out.chains, chainContent{svcChain, rules})
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
					rules = dispatchRules(svc, p, external, fam)
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

// maxCascadeEndpoints is the most endpoints a Service port spreads over with a cascade of
// per-endpoint rules; larger sets use one rule with an inline numgen map.
//
// Every inline map is an anonymous set, and the kernel names a new anonymous set by scanning all
// the sets of the table, so a full sync of N Services with inline maps costs O(N²) in the
// kernel: 22.5 s for the rules of 10,000 Services of 10 endpoints, against 3.7 s as cascades
// (nft -f in a scratch namespace). A cascade costs a new connection at most this many rule
// evaluations (only the first packet of a connection traverses the nat chains), which is small
// next to that.
const maxCascadeEndpoints = 16

// dispatchRules spreads new connections evenly over eps with numgen: up to maxCascadeEndpoints
// as a cascade where rule i of n matches with probability 1/(n-i), so each endpoint gets 1/n;
// beyond that with one rule and an inline map (or verdict map for affinity), so the cost of a
// packet does not grow with the number of endpoints.
func dispatchRules(svc *Service, p Port, eps []Endpoint, fam family) []string {
	proto := string(p.Protocol)
	if svc.AffinityTimeout > 0 {
		if len(eps) == 1 {
			return []string{"goto " + endpointChainName(svc, p, eps[0].Addr)}
		}
		rules := make([]string, 0, len(eps)+1)
		for _, ep := range eps {
			rules = append(rules, fam.selector+" saddr @"+affinitySetName(svc, p, ep.Addr)+
				" goto "+endpointChainName(svc, p, ep.Addr))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "numgen random mod %d vmap { ", len(eps))
		for i, ep := range eps {
			if i > 0 {
				b.WriteString(" , ")
			}
			fmt.Fprintf(&b, "%d : goto %s", i, endpointChainName(svc, p, ep.Addr))
		}
		b.WriteString(" }")
		return append(rules, b.String())
	}
	if len(eps) <= maxCascadeEndpoints {
		rules := make([]string, len(eps))
		for i, ep := range eps {
			rule := "meta l4proto " + proto + " dnat " + fam.selector + " to " + fam.dnatTarget(ep.Addr)
			if remaining := len(eps) - i; remaining > 1 {
				rule = "numgen random mod " + strconv.Itoa(remaining) + " == 0 " + rule
			}
			rules[i] = rule
		}
		return rules
	}
	var b strings.Builder
	fmt.Fprintf(&b, "meta l4proto %s dnat %s addr . port to numgen random mod %d map { ", proto, fam.selector, len(eps))
	for i, ep := range eps {
		if i > 0 {
			b.WriteString(" , ")
		}
		b.WriteString(strconv.Itoa(i))
		b.WriteString(" : ")
		b.WriteString(ep.Addr.Addr().String())
		b.WriteString(" . ")
		b.WriteString(strconv.Itoa(int(ep.Addr.Port())))
	}
	b.WriteString(" }")
	return []string{b.String()}
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
func writeBase(tx *knftables.Transaction, fam family, opts *Options) {
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

// writeServiceObjects adds a Service's sets, chains (flushed first when they
// may hold old rules) and rules. Map entries are written separately so that
// all deletions of a sync can precede all additions.
func writeServiceObjects(tx *knftables.Transaction, objs *serviceObjects, fam family, mayExist func(string) bool) {
	for _, name := range objs.sets {
		timeout := objs.timeout
		tx.Add(&knftables.Set{
			Name: name, Type: fam.addrType, Timeout: &timeout,
			// The kernel marks sets updated from the packet path as dynamic;
			// declaring it up front keeps later adds of the same set valid.
			Flags: []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag},
		})
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
