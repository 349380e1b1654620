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

// mapEntry is one element of a map, or of a set when it has no value.
type mapEntry struct {
	mapName string
	key     []string
	value   string
	// comment names the Service port of a service-ips or service-nodeports element, so that
	// `nft list` says whose address it is (kernel memory is spent on these only, not on the
	// endpoint elements).
	comment string
}

func (e mapEntry) id() string { return e.mapName + " " + strings.Join(e.key, " . ") }

// written is what the kernel holds under the element's key: a changed comment rewrites the
// element too.
func (e mapEntry) written() string { return e.value + "\x00" + e.comment }

func (e mapEntry) element() *knftables.Element {
	el := &knftables.Element{Map: e.mapName, Key: e.key, Value: []string{e.value}}
	if e.value == "" { // an element of a set
		el = &knftables.Element{Set: e.mapName, Key: e.key}
	}
	if e.comment != "" {
		el.Comment = &e.comment
	}
	return el
}

// portComment is "namespace/name:port", cut to what nftables keeps of a comment.
func portComment(svc *Service, p Port) string {
	c := svc.Namespace + "/" + svc.Name + ":" + portLabel(p)
	if len(c) > knftables.CommentLengthMax {
		c = c[:knftables.CommentLengthMax]
	}
	return c
}

// serviceObjects is everything one Service contributes to the table.
type serviceObjects struct {
	chains []chainContent
	// affinity holds the ClientIP affinity maps of its ports, all with the Service's timeout.
	affinity []affinityMap
	timeout  time.Duration
	entries  []mapEntry
	// picks are the shared pick chains the entries lead to (see pick.go); they belong to no
	// Service, so the Syncer creates each once.
	picks []chainContent
	// hairpin holds keys of the shared hairpin set; two Services may share
	// an endpoint, so the Syncer reference-counts them.
	hairpin [][]string
}

// renderService turns a normalized Service into nftables objects: map elements of the shared
// maps (see pick.go), plus, with ClientIP affinity, chains and maps of its own (see
// affinity.go). Ports without endpoints get entries in the no-endpoint sets, which the
// filter chains turn into a reject.
func renderService(svc *Service, fam family) serviceObjects {
	var out serviceObjects
	if svc.AffinityTimeout > 0 {
		out.timeout = svc.AffinityTimeout
	}
	for _, p := range svc.Ports {
		reachable := p.Endpoints
		if p.ExternalLocal && p.NodePort != 0 {
			reachable = unionEndpoints(p.Endpoints, p.ExternalEndpoints)
		}
		renderPort(&out, svc, p, fam)
		for _, ep := range reachable {
			if ep.Local {
				a, pt := ep.Addr.Addr().String(), strconv.Itoa(int(ep.Addr.Port()))
				out.hairpin = append(out.hairpin, []string{a, a, string(p.Protocol), pt})
			}
		}
	}
	return out
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
		chainMasquerading, chainMarkMasquerade, chainClusterMasq, chainClusterDispatch, chainAffinityRecord} {
		tx.Add(&knftables.Chain{Name: name})
	}

	ipKey := clusterPortKey(fam) + " : verdict"
	portKey := "inet_proto . inet_service : verdict"
	tx.Add(&knftables.Map{Name: mapServiceIPs, Type: ipKey})
	tx.Add(&knftables.Set{Name: setClusterPorts, Type: clusterPortKey(fam)})
	tx.Add(&knftables.Map{Name: mapServiceNodePorts, Type: portKey})
	tx.Add(&knftables.Map{Name: mapAffinityEndpoints, Type: clusterPortKey(fam) + " : verdict"})
	// Plain sets with a rule each, not verdict maps: adding an element to a verdict map makes the
	// kernel validate every chain reachable from the base chains (every verdict map element), so a
	// new Service, which has no endpoints until its EndpointSlice comes, cost more the larger the
	// table; a plain set's element is not validated.
	tx.Add(&knftables.Set{Name: setNoEndpointIPs, Type: clusterPortKey(fam)})
	tx.Add(&knftables.Set{Name: setNoEndpointPorts, Type: "inet_proto . inet_service"})
	tx.Add(&knftables.Set{Name: setNoLocalPorts, Type: "inet_proto . inet_service"})
	tx.Add(&knftables.Set{Name: setHairpin, Type: fam.addrType + " . " + fam.addrType + " . inet_proto . inet_service"})
	writeSharedMaps(tx, fam)

	ip := fam.selector
	notLoopback := "fib daddr type local " + ip + " daddr != " + fam.loopback
	rules := []struct{ chain, rule string }{
		{chainNATPrerouting, "jump " + chainServices},
		{chainNATOutput, "jump " + chainServices},
		// Recording a new connection's client needs the endpoint NAT gave it, so it happens on
		// the way out, before masquerading changes the source (see affinity.go).
		{chainNATPostrouting, "ct status dnat jump " + chainAffinityRecord},
		{chainNATPostrouting, "jump " + chainMasquerading},
		{chainAffinityRecord, clusterPortMatch(fam) + " vmap @" + mapAffinityEndpoints},
		{chainFilterInput, "ct state new jump " + chainEndpointChecks},
		{chainFilterInput, "ct state new jump " + chainNodePortChecks},
		{chainFilterForward, "ct state new jump " + chainEndpointChecks},
		{chainFilterOutput, "ct state new jump " + chainEndpointChecks},
		{chainServices, clusterPortMatch(fam) + " vmap @" + mapServiceIPs},
		{chainServices, clusterPortMatch(fam) + " @" + setClusterPorts + " goto " + chainClusterDispatch},
		{chainServices, notLoopback + " meta l4proto . th dport vmap @" + mapServiceNodePorts},
		{chainEndpointChecks, clusterPortMatch(fam) + " @" + setNoEndpointIPs + " goto " + chainReject},
		// A Local NodePort whose endpoints are all elsewhere drops: the client's load balancer
		// health check then moves it to another node, as with kube-proxy.
		{chainNodePortChecks, notLoopback + " meta l4proto . th dport @" + setNoLocalPorts + " drop"},
		{chainNodePortChecks, notLoopback + " meta l4proto . th dport @" + setNoEndpointPorts + " goto " + chainReject},
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

// writeServiceObjects adds a Service's chains (flushed first when they may exist: mayExist),
// then its maps and rules. Map entries are written separately so that all deletions of a
// sync can precede all additions.
func writeServiceObjects(tx *txn, objs *serviceObjects, fam family, mayExist func(string) bool) {
	writeServiceChains(tx, objs, mayExist)
	writeServiceContent(tx, objs, fam)
}

// writeServiceChains adds a Service's chains, empty: flushed first when they may exist.
//
// A full sync writes every Service's chains before any Service's content. The kernel keeps a
// table's chains in a list that every commit walks, all of it, whatever the commit changes; chains
// created one after the other sit together in memory, and a walk of them after a second idle
// costs about half as much as one of chains spread among the rules and sets created between
// them (BenchmarkKernelScale, FLEETSLICE_BENCH_PAUSE=1s, 50,000 Services with 1,000 of them with
// ClientIP affinity: a change's median sync 3.1 and 2.2 ms against 6.5 and 4.9 ms).
func writeServiceChains(tx *txn, objs *serviceObjects, mayExist func(string) bool) {
	for _, c := range objs.chains {
		tx.Add(&knftables.Chain{Name: c.name})
		if mayExist(c.name) {
			tx.Flush(&knftables.Chain{Name: c.name})
		}
	}
}

// writeServiceContent adds a Service's maps, and the rules of its chains, which must
// exist by then.
func writeServiceContent(tx *txn, objs *serviceObjects, fam family) {
	for _, m := range objs.affinity {
		writeAffinityMaps(tx, m, objs.timeout, fam)
	}
	for _, c := range objs.chains {
		for _, r := range c.rules {
			tx.Add(&knftables.Rule{Chain: c.name, Rule: r})
		}
	}
}
