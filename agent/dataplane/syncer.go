package dataplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/knftables"
)

// Options configure a Syncer. The zero value is usable for IPv4.
type Options struct {
	// Family is knftables.IPv4Family (the default) or knftables.IPv6Family
	// and must match the family the knftables.Interface was created with.
	// A dual-stack node runs one Syncer per family.
	Family knftables.Family
	// PodCIDRs sets the masquerade policy for cluster traffic: connections
	// to a cluster IP from a source outside these prefixes (the node itself,
	// other hosts) are masqueraded so replies come back through this node;
	// connections from pods keep their source. Empty means masquerade all
	// cluster-IP traffic, which is always correct, only less transparent.
	// NodePort traffic is always masqueraded, except with ExternalLocal.
	// A pod reaching itself through a Service (hairpin) is masqueraded when
	// its endpoint is marked Local.
	PodCIDRs []netip.Prefix
	// MasqueradeMark is the packet mark bit that flags connections for
	// masquerading; zero means 0x4000, the bit kube-proxy uses.
	MasqueradeMark uint32
	// StaleChainDelay is how long a chain that is no longer used stays
	// (flushed) before it is deleted by a later sync. Kernels before 6.2
	// notice late that a chain lost its last map reference and refuse to
	// delete it in the same transaction. Zero means one second.
	StaleChainDelay time.Duration
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
}

// Stats describe one Sync.
type Stats struct {
	// Full is true when the table was deleted and rebuilt.
	Full bool
	// Services counts the Services programmed after the sync.
	Services int
	// Changed counts Services whose objects were (re)written.
	Changed int
	// Removed counts Services whose objects were deleted.
	Removed int
	// Operations is the number of operations in the transaction.
	Operations int
	// Duration is the wall time of the whole sync, transaction included.
	Duration time.Duration
	// CleanupAt, when set, is when a later sync (SyncChanges with nothing changed will do) can
	// delete the chains this one left flushed (see Options.StaleChainDelay); until then they are
	// empty and unreachable.
	CleanupAt time.Time
	// Rejected lists Services left out of the table, with the reason.
	Rejected []Rejection
}

// Rejection explains why a Service was left out.
type Rejection struct {
	Service string
	Reason  string
}

// Syncer programs Services into the fleetslice table. It is safe for
// concurrent use; syncs are serialized.
type Syncer struct {
	mu   sync.Mutex
	nft  knftables.Interface // nil unless the backend is knftables
	back Backend
	fam  family
	opts Options

	// What the last successful transaction left in the kernel.
	written     map[string]*serviceRecord
	hairpinRefs map[string]int
	// pickRefs counts the Services using each shared pick chain (see pick.go).
	pickRefs    map[string]int
	staleChains map[string]time.Time
	// forgetDue holds the affinity maps to read once more for clients of a lost endpoint
	// (see forget.go), by name.
	forgetDue map[string]forgetDue
	// records tracks which affinity maps record each endpoint's clients (see affinity.go).
	records recordings
	// needFull forces the next sync to rebuild: nothing is known before the
	// first sync, and after a failure the table may have drifted.
	needFull bool
	// contended is set while the last Sync had Services contending for a claim: the loser
	// may win once the winner goes, so SyncChanges, which sees only changes, declines.
	contended bool
	hasher    rawHasher
	// claimOwners maps what the written Services claim to their keys.
	claimOwners map[claim]string
	// gen numbers syncs; a record stamped with the current one is in this
	// sync's input (see prepare).
	gen    uint64
	keyBuf []byte
}

// serviceRecord remembers what one Service wrote, so an incremental sync can
// skip it when unchanged and remove exactly its objects otherwise.
type serviceRecord struct {
	fingerprint [32]byte // of the normalized Service
	seen        uint64   // the last sync whose input held this Service
	raw         uint64   // of the Service as passed, see rawHasher
	claims      []claim
	chains      []string
	chainSums   []uint64 // of each chain's rules, see chainContent.sum
	affinity    []affinityMap
	picks       []string // shared pick chains its entries lead to
	entries     []mapEntry
	hairpin     [][]string
}

// New returns a Syncer that writes through nft, which must have been created
// for Options.Family and TableName (or be a knftables.NewFake for tests and
// dry runs).
func New(nft knftables.Interface, opts Options) (*Syncer, error) {
	if nft == nil {
		return nil, errors.New("dataplane: nil nftables interface")
	}
	s, err := NewWithBackend(knftablesBackend{nft}, opts)
	if err != nil {
		return nil, err
	}
	s.nft = nft
	return s, nil
}

// NewWithBackend returns a Syncer that applies its transactions through back, which must
// program Options.Family's table.
func NewWithBackend(back Backend, opts Options) (*Syncer, error) {
	if back == nil {
		return nil, errors.New("dataplane: nil backend")
	}
	fam, ok := familyFor(opts.Family)
	if !ok {
		return nil, fmt.Errorf("dataplane: unsupported family %q (want ip or ip6)", opts.Family)
	}
	opts.Family = fam.nft
	if opts.MasqueradeMark == 0 {
		opts.MasqueradeMark = 0x4000
	}
	if opts.StaleChainDelay <= 0 {
		opts.StaleChainDelay = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	for _, p := range opts.PodCIDRs {
		if !p.IsValid() {
			return nil, fmt.Errorf("dataplane: invalid pod CIDR %v", p)
		}
	}
	s := &Syncer{
		back: back, fam: fam, opts: opts,
		written:     map[string]*serviceRecord{},
		hairpinRefs: map[string]int{},
		pickRefs:    map[string]int{},
		staleChains: map[string]time.Time{},
		forgetDue:   map[string]forgetDue{},
		records:     newRecordings(),
		claimOwners: map[claim]string{},
		needFull:    true,
	}
	s.hasher.h.SetSeed(maphash.MakeSeed())
	return s, nil
}

// desiredService is a validated Service ready to render, or one whose
// input is identical to what was last written (reused).
type desiredService struct {
	key         string
	raw         uint64
	svc         Service // normalized; zero when reused
	fingerprint [32]byte
	claims      []claim
	reused      *serviceRecord
}

// Sync makes the table match services in one transaction. With full, or
// when the previous sync failed, it rebuilds the whole table; otherwise it
// touches only Services that changed since the last successful sync. On
// error nothing in the kernel changed (the transaction is atomic), the
// Syncer's memory is untouched, and the next sync is a full one.
func (s *Syncer) Sync(ctx context.Context, services []Service, full bool) (Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.opts.Clock()
	stats := Stats{Full: full || s.needFull}
	desired, kept, rejected, contended := s.prepare(services, stats.Full)
	stats.Rejected = rejected
	stats.Services = len(desired) + kept

	tx := &txn{}
	var commit func()
	if stats.Full {
		commit = s.planFull(tx, desired, &stats)
	} else {
		var err error
		if commit, err = s.planIncremental(ctx, tx, desired, s.unseen(), start, &stats); err != nil {
			s.needFull = true
			return stats, err
		}
	}
	if err := s.apply(ctx, tx, commit, start, &stats); err != nil {
		return stats, err
	}
	s.needFull = false
	s.contended = contended
	return stats, nil
}

// apply runs the planned transaction, if it holds anything, and commits the plan to memory once
// the kernel took it. A failure leaves memory as it was and makes the next sync a full one.
func (s *Syncer) apply(ctx context.Context, tx *txn, commit func(), start time.Time, stats *Stats) error {
	defer func() { stats.Duration = s.opts.Clock().Sub(start) }()
	stats.Operations = len(tx.ops)
	if stats.Operations > 0 {
		if err := s.back.apply(ctx, tx.ops); err != nil {
			s.needFull = true
			return fmt.Errorf("dataplane: nftables transaction of %d operations failed, table left as it was: %w",
				stats.Operations, err)
		}
	}
	commit()
	later := func(at time.Time) {
		if stats.CleanupAt.IsZero() || at.Before(stats.CleanupAt) {
			stats.CleanupAt = at
		}
	}
	for _, since := range s.staleChains {
		later(since.Add(s.opts.StaleChainDelay))
	}
	for _, f := range s.forgetDue {
		later(f.due)
	}
	return nil
}

// unseen lists the written Services that this sync's input no longer holds.
func (s *Syncer) unseen() []string {
	var out []string
	for key, rec := range s.written {
		if rec.seen != s.gen {
			out = append(out, key)
		}
	}
	return out
}

// claim identifies a packet match two Services must not share.
type claim struct {
	ip       netip.Addr // invalid for NodePorts
	protocol Protocol
	port     uint16
}

// prepare validates and normalizes services, in a stable order. Of two
// Services claiming the same cluster IP and port or the same NodePort, the
// first by namespace/name wins and the other is rejected until the conflict
// goes away.
//
// A Service identical to what was last written is not returned but counted
// (kept) and stamped with this sync's generation, so that the work done for
// each unchanged Service is one digest and one map lookup, without
// allocation: at 50,000 Services that scan is what an incremental sync costs
// besides the change itself.
func (s *Syncer) prepare(services []Service, full bool) (desired []desiredService, kept int, rejected []Rejection, contended bool) {
	s.gen++
	var byKey map[string]bool // keys of the Services returned, made on the first
	for i := range services {
		svc := &services[i]
		s.keyBuf = append(append(append(s.keyBuf[:0], svc.Namespace...), '/'), svc.Name...)
		raw := s.hasher.digest(svc)
		rec := s.written[string(s.keyBuf)]
		if rec != nil && !full && rec.raw == raw && rec.seen != s.gen && !byKey[string(s.keyBuf)] {
			rec.seen = s.gen
			kept++
			continue
		}
		key := string(s.keyBuf)
		norm, ok, err := normalize(*svc, s.fam)
		if err != nil {
			rejected = append(rejected, Rejection{key, err.Error()})
			continue
		}
		if !ok {
			continue
		}
		if byKey[key] || (rec != nil && rec.seen == s.gen) {
			rejected = append(rejected, Rejection{key, "duplicate service " + key})
			continue
		}
		if byKey == nil {
			byKey = map[string]bool{}
		}
		byKey[key] = true
		desired = append(desired, desiredService{key: key, raw: raw, svc: norm, claims: claimsOf(&norm)})
	}
	if contended = s.contested(desired); contended {
		desired, kept, rejected = s.resolveContest(desired, rejected)
	}
	for i := range desired {
		desired[i].fingerprint = fingerprint(&desired[i].svc)
		if rec := s.written[desired[i].key]; rec != nil {
			rec.seen = s.gen
		}
	}
	return desired, kept, rejected, contended
}

// contested reports whether a Service to be (re)written claims what another
// Service of this sync claims: another one to be written, or a kept one (its
// claims are those recorded).
func (s *Syncer) contested(desired []desiredService) bool {
	return s.clash(desired, func(owner string) bool {
		rec := s.written[owner]
		return rec != nil && rec.seen == s.gen
	})
}

// clash reports whether two of desired claim the same thing, or one claims what a written
// Service that stays (per stays) claims; a written Service that is itself in desired is judged by
// its new claims.
func (s *Syncer) clash(desired []desiredService, stays func(owner string) bool) bool {
	local := map[claim]string{}
	for i := range desired {
		for _, c := range desired[i].claims {
			if owner, taken := local[c]; taken && owner != desired[i].key {
				return true
			}
			local[c] = desired[i].key
			if owner, taken := s.claimOwners[c]; taken && owner != desired[i].key && stays(owner) {
				return true
			}
		}
	}
	return false
}

// resolveContest settles claims over every Service of the sync, kept ones
// included, in namespace/name order, so that the winner is the same whatever
// order the caller used. A kept Service that loses is unstamped, so the sync
// removes it.
func (s *Syncer) resolveContest(desired []desiredService, rejected []Rejection) ([]desiredService, int, []Rejection) {
	all := desired
	for key, rec := range s.written {
		if rec.seen == s.gen {
			all = append(all, desiredService{key: key, raw: rec.raw, fingerprint: rec.fingerprint, claims: rec.claims, reused: rec})
		}
	}
	sortByKey(all)
	owners := map[claim]string{}
	var out []desiredService
	kept := 0
	for _, d := range all {
		if reason := claimAll(owners, &d); reason != "" {
			rejected = append(rejected, Rejection{d.key, reason})
			if d.reused != nil {
				d.reused.seen = 0
			}
			continue
		}
		if d.reused != nil {
			kept++
		} else {
			out = append(out, d)
		}
	}
	return out, kept, rejected
}

func sortByKey(desired []desiredService) {
	slices.SortFunc(desired, func(a, b desiredService) int { return cmp.Compare(a.key, b.key) })
}

func claimsOf(svc *Service) []claim {
	mine := make([]claim, 0, len(svc.Ports)*(len(svc.ClusterIPs)+1))
	for _, p := range svc.Ports {
		for _, ip := range svc.ClusterIPs {
			mine = append(mine, claim{ip, p.Protocol, p.Port})
		}
		if p.NodePort != 0 {
			mine = append(mine, claim{netip.Addr{}, p.Protocol, p.NodePort})
		}
	}
	return mine
}

func claimAll(owners map[claim]string, d *desiredService) string {
	mine := d.claims
	for _, c := range mine {
		if owner, taken := owners[c]; taken && owner != d.key {
			what := fmt.Sprintf("%s %s/%d", c.ip, c.protocol, c.port)
			if !c.ip.IsValid() {
				what = fmt.Sprintf("node port %s/%d", c.protocol, c.port)
			}
			return what + " is already used by " + owner
		}
	}
	for _, c := range mine {
		owners[c] = d.key
	}
	return ""
}

// planFull deletes and recreates the table. "add; delete; add" works
// whether or not the table exists, and dropping it removes every leftover
// object, which a flush would keep.
func (s *Syncer) planFull(tx *txn, desired []desiredService, stats *Stats) func() {
	sortByKey(desired) // the same input always gives the same transaction
	tx.Add(&knftables.Table{})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: knftables.PtrTo("fleetslice node agent: Service load balancing")})
	writeBase(tx, s.fam, &s.opts)

	written := make(map[string]*serviceRecord, len(desired))
	refs := map[string]int{}
	hairpinKeys := map[string][]string{}
	never := func(string) bool { return false }
	rendered := make([]serviceObjects, len(desired))
	pickRefs := map[string]int{}
	for i := range desired {
		rendered[i] = renderService(&desired[i].svc, s.fam)
		// Pick chains before any element: a chain that starts using a map makes the kernel
		// walk the map's elements (see pick.go).
		for _, c := range rendered[i].picks {
			if pickRefs[c.name]++; pickRefs[c.name] == 1 {
				writePick(tx, c, s.fam)
			}
		}
	}
	writeDispatch(tx, clusterPicksInUse(pickRefs), s.fam, false)
	// Every chain before any content: see writeServiceChains.
	for i := range desired {
		writeServiceChains(tx, &rendered[i], never)
	}
	var affinity []affinityMap
	for i := range desired {
		affinity = append(affinity, rendered[i].affinity...)
	}
	records := newRecordings()
	recordPlan := records.plan(nil, affinity, s.fam)
	recordChains := records.created(recordPlan)
	for _, c := range recordChains {
		tx.Add(&knftables.Chain{Name: c.name})
	}
	for i := range desired {
		writeServiceContent(tx, &rendered[i], s.fam)
	}
	for _, c := range recordChains { // they name the maps just written
		for _, r := range c.rules {
			tx.Add(&knftables.Rule{Chain: c.name, Rule: r})
		}
	}
	for _, rc := range recordPlan.changes {
		tx.Add(&knftables.Element{Map: mapAffinityEndpoints, Key: rc.key, Value: []string{"goto " + rc.now.name}})
	}
	for i := range desired {
		d, objs := &desired[i], &rendered[i]
		for _, e := range objs.entries {
			tx.Add(e.element())
		}
		for _, k := range objs.hairpin {
			id := strings.Join(k, " . ")
			refs[id]++
			hairpinKeys[id] = k
		}
		written[d.key] = newRecord(d, objs)
	}
	for _, id := range sortedKeys(hairpinKeys) {
		tx.Add(&knftables.Element{Set: setHairpin, Key: hairpinKeys[id]})
	}
	stats.Changed = len(desired)
	stats.Removed = countRemoved(s.written, desired)
	return func() {
		s.written = written
		s.hairpinRefs = refs
		s.pickRefs = pickRefs
		s.staleChains = map[string]time.Time{}
		s.forgetDue = map[string]forgetDue{} // the table, clients and all, is new
		records.apply(recordPlan)
		s.records = records
		s.claimOwners = make(map[claim]string, len(written))
		for key, rec := range written {
			for _, c := range rec.claims {
				s.claimOwners[c] = key
			}
		}
	}
}

func countRemoved(written map[string]*serviceRecord, desired []desiredService) int {
	still := 0
	for _, d := range desired {
		if written[d.key] != nil {
			still++
		}
	}
	return len(written) - still
}

func newRecord(d *desiredService, objs *serviceObjects) *serviceRecord {
	rec := &serviceRecord{fingerprint: d.fingerprint, raw: d.raw, claims: d.claims,
		affinity: objs.affinity, entries: objs.entries, hairpin: objs.hairpin}
	for _, c := range objs.picks {
		rec.picks = append(rec.picks, c.name)
	}
	rec.chains = make([]string, len(objs.chains))
	rec.chainSums = make([]uint64, len(objs.chains))
	for i, c := range objs.chains {
		rec.chains[i], rec.chainSums[i] = c.name, c.sum()
	}
	return rec
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
