package dataplane

import (
	"hash/fnv"
	"net/netip"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// chainContent is one chain the dataplane owns with its rules in order.
type chainContent struct {
	name  string
	rules [][]ruleset.Stmt
}

// sum digests the rules, so a later sync can tell that a chain it wrote is still right.
func (c chainContent) sum() uint64 {
	h := fnv.New64a()
	ruleset.Sum(h, c.rules)
	return h.Sum64()
}

// entryKey is an element's key: up to three fields, the unused ones zero. Being comparable, it
// indexes maps without being spelled out.
type entryKey [3]ruleset.Value

func keyOf(vals ...ruleset.Value) entryKey {
	var k entryKey
	copy(k[:], vals)
	return k
}

// fields is how many of the key's values are set.
func (k *entryKey) fields() int {
	n := 0
	for n < len(k) && k[n].Kind != 0 {
		n++
	}
	return n
}

// entryValue is what a map element holds: an endpoint, or a chain to go to; zero in a set.
type entryValue struct {
	endpoint netip.AddrPort
	chain    string
}

// mapEntry is one element of a map, or of a set when it has no value.
type mapEntry struct {
	mapName string
	key     entryKey
	value   entryValue
	// comment names the Service port of a service-ips or service-nodeports element, so that
	// `nft list` says whose address it is (kernel memory is spent on these only, not on the
	// endpoint elements).
	comment string
}

type entryID struct {
	mapName string
	key     entryKey
}

func (e mapEntry) id() entryID { return entryID{e.mapName, e.key} }

// entryWritten is what the kernel holds under an element's key: a changed comment rewrites
// the element too.
type entryWritten struct {
	value   entryValue
	comment string
}

func (e mapEntry) written() entryWritten { return entryWritten{e.value, e.comment} }

// element is e as the ruleset spells it. Its key shares e's array rather than copying it (a
// full sync spells every element of the table): entries are not changed once rendered.
func (e *mapEntry) element() *ruleset.Element {
	return new(entrySpeller).spell(e)
}

// entrySpeller spells entries into one Element it rewrites for each, so that a run of a
// Service's elements, read one at a time (see ruleset.Elements), allocates none of them.
type entrySpeller struct {
	el      ruleset.Element
	value   [2]ruleset.Value
	verdict ruleset.Verdict
}

// spell returns e as the ruleset spells it, valid until the next spell: the key shares e's
// array, the value and verdict the speller's own.
func (s *entrySpeller) spell(e *mapEntry) *ruleset.Element {
	n := e.key.fields()
	s.el = ruleset.Element{Set: e.mapName, Key: e.key[:n:n], Comment: e.comment}
	switch {
	case e.value.chain != "":
		s.verdict = ruleset.Verdict{Kind: ruleset.Goto, Chain: e.value.chain}
		s.el.Map, s.el.Verdict = true, &s.verdict
	case e.value.endpoint.IsValid():
		s.value = [2]ruleset.Value{ruleset.Addr(e.value.endpoint.Addr()), ruleset.Port(e.value.endpoint.Port())}
		s.el.Map, s.el.Value = true, s.value[:]
	}
	return &s.el
}

// portComment is "namespace/name:port", cut to what nftables keeps of a comment.
func portComment(svc *Service, p Port) string {
	c := svc.Namespace + "/" + svc.Name + ":" + portLabel(p)
	if len(c) > knftables.CommentLengthMax {
		c = c[:knftables.CommentLengthMax]
	}
	return c
}

// rsProto is p as ruleset numbers it.
func rsProto(p Protocol) ruleset.Protocol {
	switch p {
	case UDP:
		return ruleset.UDP
	case SCTP:
		return ruleset.SCTP
	}
	return ruleset.TCP
}

// hairpinKey is an element of the hairpin set: a local endpoint reaching itself.
type hairpinKey struct {
	endpoint netip.AddrPort
	proto    Protocol
}

// id spells the key as nft would, which orders the set's elements in a transaction.
func (k hairpinKey) id() string {
	a := k.endpoint.Addr().String()
	return a + " . " + a + " . " + string(k.proto) + " . " + itoa(int(k.endpoint.Port()))
}

func (k hairpinKey) element() *ruleset.Element {
	a := ruleset.Addr(k.endpoint.Addr())
	return &ruleset.Element{Set: setHairpin, Key: []ruleset.Value{a, a, ruleset.Proto(rsProto(k.proto)), ruleset.Port(k.endpoint.Port())}}
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
	hairpin []hairpinKey
}

// renderService turns a normalized Service into ruleset objects: map elements of the shared
// maps (see pick.go), plus, with ClientIP affinity, chains and maps of its own (see
// affinity.go). Ports without endpoints get entries in the no-endpoint sets, which the
// filter chains turn into a reject.
func renderService(svc *Service, fam family) serviceObjects {
	return renderServiceInto(svc, fam, nil)
}

// renderServiceInto is renderService with its map elements appended to entries[:0], which is
// grown once when it is too small: a full sync renders every Service's elements into buffers
// it reuses (see entryBuffers).
func renderServiceInto(svc *Service, fam family, entries []mapEntry) serviceObjects {
	var out serviceObjects
	if svc.AffinityTimeout > 0 {
		out.timeout = svc.AffinityTimeout
	}
	if n := entriesAtMost(svc); cap(entries) < n {
		entries = make([]mapEntry, 0, n)
	}
	out.entries = entries[:0]
	for _, p := range svc.Ports {
		reachable := p.Endpoints
		if p.ExternalLocal && p.NodePort != 0 {
			reachable = unionEndpoints(p.Endpoints, p.ExternalEndpoints)
		}
		renderPort(&out, svc, p, fam)
		for _, ep := range reachable {
			if ep.Local {
				out.hairpin = append(out.hairpin, hairpinKey{ep.Addr, p.Protocol})
			}
		}
	}
	return out
}

// entriesAtMost bounds the map elements renderService writes for svc, so that the elements of a
// Service with many endpoints are allocated once rather than through every size on their way.
func entriesAtMost(svc *Service) int {
	n := 0
	for _, p := range svc.Ports {
		n += len(svc.ClusterIPs) * (2 + totalWeight(p.Endpoints))
		if p.NodePort != 0 {
			n += 1 + totalWeight(p.Endpoints) + totalWeight(p.ExternalEndpoints)
		}
	}
	return n
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
		tx.Add(&ruleset.Chain{Name: c.name})
		if mayExist(c.name) {
			tx.Flush(&ruleset.Chain{Name: c.name})
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
			tx.Add(&ruleset.Rule{Chain: c.name, Stmts: r})
		}
	}
}
