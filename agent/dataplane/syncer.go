package dataplane

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"sort"
	"sync"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
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
	// Generations, when set, is shared with the other Syncers that program the same network
	// namespace (the other IP family): see Generations. Nil gives the Syncer its own.
	Generations *Generations
}

// Stats describe one Sync.
type Stats struct {
	// Full is true for a full sync: every Service was compared with the kernel's table, which
	// was written where it differed (see Rebuilt).
	Full bool
	// Rebuilt, after a full sync that deleted and recreated the table instead of writing the
	// difference, says why: there was no table, it could not be read, or it differed in a way
	// no difference repairs. Empty otherwise.
	Rebuilt string
	// Services counts the Services programmed after the sync.
	Services int
	// Changed counts Services whose objects were (re)written; after a full sync, every Service
	// (each was compared, and written where the kernel's table differed).
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
//
// A sync plans on what the Syncer remembers (state) and on what it read from the kernel before
// planning (kernelView), without changing either, and commits the plan to state only once the
// backend applied its transaction: a failed sync leaves state as it was.
type Syncer struct {
	mu   sync.Mutex
	nft  knftables.Interface // nil unless the backend is knftables
	back Backend
	pl   planner
	// state is what the last successful transaction left in the kernel.
	state state
	// needFull forces the next sync to be a full one: nothing is known before the first sync,
	// and after a failure the table may have drifted.
	needFull bool
	// rebuildNext makes the next full sync rebuild the table without comparing: the last full
	// sync's difference was refused, and a rebuild does not depend on what the kernel holds.
	rebuildNext bool
	// contended is set while the last Sync had Services contending for a claim: the loser
	// may win once the winner goes, so SyncChanges, which sees only changes, declines.
	contended bool
	scratch   scratch
}

// planner holds what plans depend on besides state and input: the family and the options.
type planner struct {
	fam  family
	opts Options
}

// state is what the Syncer remembers of the table. Only commit changes it.
type state struct {
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
	// claimOwners maps what the written Services claim to their keys.
	claimOwners map[claim]string
	slots       slots
}

func newState() state {
	return state{
		written:     map[string]*serviceRecord{},
		hairpinRefs: map[string]int{},
		pickRefs:    map[string]int{},
		staleChains: map[string]time.Time{},
		forgetDue:   map[string]forgetDue{},
		records:     newRecordings(),
		claimOwners: map[claim]string{},
	}
}

// serviceRecord remembers what one Service wrote, so an incremental sync can
// skip it when unchanged and remove exactly its objects otherwise.
type serviceRecord struct {
	fingerprint [32]byte // of the normalized Service
	raw         uint64   // of the Service as passed, see rawHasher
	// slot numbers the record among the written ones, for the marks of scratch; given at
	// commit.
	slot      int
	claims    []claim
	chains    []string
	chainSums []uint64 // of each chain's rules, see chainContent.sum
	affinity  []affinityMap
	picks     []string // shared pick chains its entries lead to
	// svc is the normalized Service as written. Its map and hairpin elements are rendered
	// from it again when it changes or goes: they are many times its size (see docs/agent.md,
	// Memory).
	svc Service
}

// New returns a Syncer that writes through nft, which must have been created
// for Options.Family and TableName (or be a knftables.NewFake for tests and
// dry runs).
func New(nft knftables.Interface, opts Options) (*Syncer, error) {
	if nft == nil {
		return nil, errors.New("dataplane: nil nftables interface")
	}
	fam, _ := familyFor(opts.Family)
	s, err := NewWithBackend(knftablesBackend{nft, fam.rs}, opts)
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
	if k, ok := back.(keepsGenerations); ok && opts.Generations != nil {
		k.generations().g = opts.Generations // before the first sync: nothing known to carry over
	}
	s := &Syncer{back: back, pl: planner{fam: fam, opts: opts}, state: newState(), needFull: true}
	s.scratch.hasher.h.SetSeed(maphash.MakeSeed())
	return s, nil
}

// Sync makes the table match services in one transaction. With full, or when the previous
// sync failed, it compares every Service with the kernel's table and writes where it differs;
// otherwise it touches only Services that changed since the last successful sync. On error
// nothing in the kernel changed (the transaction is atomic), the Syncer's memory is untouched,
// and the next sync is a full one.
func (s *Syncer) Sync(ctx context.Context, services []Service, full bool) (Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.pl.opts.Clock()
	stats := Stats{Full: full || s.needFull}
	in := s.prepare(services, stats.Full)
	stats.Rejected = in.rejected
	stats.Services = len(in.desired) + in.kept

	var p *plan
	var err error
	if stats.Full {
		p, err = s.planFullSync(ctx, in.desired, start)
	} else {
		p, err = s.planChanges(ctx, in.desired, s.unseen(), start)
	}
	if err != nil {
		s.needFull = true
		stats.Changed, stats.Removed = p.changed, p.removed
		return stats, err
	}
	if err := s.apply(ctx, p, start, &stats); err != nil {
		s.rebuildNext = s.rebuildNext || (stats.Full && p.rebuilt == "")
		return stats, err
	}
	s.needFull = false
	if stats.Full {
		s.rebuildNext = false
	}
	s.contended = in.contended
	return stats, nil
}

// planFullSync renders every Service, reads the kernel's table and the affinity maps the plan
// must clean (see fullForgetTargets), then plans. A table that cannot be read is rebuilt.
func (s *Syncer) planFullSync(ctx context.Context, desired []desiredService, now time.Time) (*plan, error) {
	r := s.pl.renderFull(&s.state, desired)
	var view kernelView
	if s.rebuildNext {
		view.rebuild = "the last full sync's transaction was refused"
	} else if img, sp, err := s.back.read(ctx); err != nil {
		view.rebuild = "reading the table: " + err.Error()
	} else {
		view.table, view.spell = img, sp
	}
	if view.rebuild == "" && view.table != nil && view.table.exists {
		targets, _, _ := fullForgetTargets(&s.state, r, view.table, now)
		read, err := readKernel(ctx, s.back, targets)
		if err != nil {
			return &plan{changed: r.changed, removed: r.removed}, err
		}
		view.clients = read.clients
	}
	return s.pl.planFull(&s.state, r, view, now), nil
}

// planChanges plans an incremental sync: it works out what changes, reads from the kernel what
// the plan must know (the clients of affinity maps that lose endpoints), then plans. On error
// the plan holds only the counts of changes.
func (s *Syncer) planChanges(ctx context.Context, desired []desiredService, removed []string, now time.Time) (*plan, error) {
	d := s.pl.diff(&s.state, desired, removed)
	targets, _, _ := forgetTargets(&s.state, d.changes, now)
	view, err := readKernel(ctx, s.back, targets)
	if err != nil {
		return &plan{changed: d.changed, removed: d.removed}, err
	}
	return s.pl.planIncremental(&s.state, d, view, now), nil
}

// apply runs the planned transaction, if it holds anything, and commits the plan to memory once
// the kernel took it. A failure leaves memory as it was and makes the next sync a full one.
func (s *Syncer) apply(ctx context.Context, p *plan, start time.Time, stats *Stats) error {
	defer func() { stats.Duration = s.pl.opts.Clock().Sub(start) }()
	stats.Changed, stats.Removed = p.changed, p.removed
	stats.Operations, stats.Rebuilt = ruleset.Count(p.ops), p.rebuilt
	if stats.Operations > 0 || p.table != nil {
		if err := s.back.apply(ctx, p.ops, p.table); err != nil {
			s.needFull = true
			return fmt.Errorf("dataplane: nftables transaction of %d operations failed, table left as it was: %w",
				stats.Operations, err)
		}
	}
	s.state.commit(p.pending)
	later := func(at time.Time) {
		if stats.CleanupAt.IsZero() || at.Before(stats.CleanupAt) {
			stats.CleanupAt = at
		}
	}
	for _, since := range s.state.staleChains {
		later(since.Add(s.pl.opts.StaleChainDelay))
	}
	for _, f := range s.state.forgetDue {
		later(f.due)
	}
	return nil
}

// plan is a sync's transaction and what it leaves in memory once applied.
type plan struct {
	ops              []ruleset.Op
	changed, removed int
	pending          *pending
	// table is set by a full sync that did not rebuild: what the table holds after it (see
	// Backend.apply).
	table []ruleset.Op
	// rebuilt says why a full sync rebuilds the table (Stats.Rebuilt).
	rebuilt string
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
