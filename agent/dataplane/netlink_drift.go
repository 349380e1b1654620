package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/netlinkenc"
)

// Kinds of drift, as the agent's metric labels them.
const (
	// DriftTableMissing: the table the agent programmed is gone.
	DriftTableMissing = "table-missing"
	// DriftContentChanged: a chain, rule, set, map or element differs from what the agent wrote.
	DriftContentChanged = "content-changed"
)

// Drift is a difference between the kernel's table and what the agent last programmed.
type Drift struct {
	Kind string
	// Detail names the first difference found, for the log.
	Detail string
}

// DriftCheck is the outcome of one drift check.
type DriftCheck struct {
	// Family is the table's family: ip or ip6.
	Family string
	// Listed is true when the table was read back from the kernel: the ruleset changed since
	// the agent's last write (possibly only in other tables). When false the check cost one
	// netlink round trip.
	Listed bool
	// Drift is nil when the kernel holds exactly what the agent wrote.
	Drift *Drift
}

// ErrDriftUnsupported is returned by CheckDrift for Syncers that cannot read their table back:
// those made with New (knftables' in-memory fake for dry runs and tests, or nft without
// NewKernelNft).
var ErrDriftUnsupported = errors.New("dataplane: this backend does not check for drift")

type driftChecker interface {
	drift(ctx context.Context) (DriftCheck, error)
}

// CheckDrift compares the kernel's table with what the Syncer's last successful sync left
// there. On drift the next Sync rebuilds the table. Before the first successful sync, and
// after a failed one, there is nothing to compare with and the check reports no drift: the
// next sync is a full one anyway.
func (s *Syncer) CheckDrift(ctx context.Context) (DriftCheck, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dc, ok := s.back.(driftChecker)
	if !ok {
		return DriftCheck{}, ErrDriftUnsupported
	}
	if s.needFull {
		return DriftCheck{}, nil
	}
	res, err := dc.drift(ctx)
	res.Family = string(s.pl.fam.nft)
	if res.Drift != nil {
		s.needFull = true
	}
	return res, err
}

// generation asks the kernel for the nftables ruleset generation, which every committed batch
// (anyone's, in any table of this network namespace) increments.
func generation() (uint32, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN),
			Flags: netlink.Request,
		},
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("reading the nftables generation: %w", err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, err
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, errors.New("reading the nftables generation: no generation in the answer")
}

func (b *netlinkBackend) drift(ctx context.Context) (DriftCheck, error) {
	if err := ctx.Err(); err != nil {
		return DriftCheck{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.model.known {
		return DriftCheck{}, nil
	}
	gen, err := generation()
	if err != nil {
		return DriftCheck{}, err
	}
	if b.gens.at(gen) {
		return DriftCheck{}, nil
	}
	want, err := b.expected()
	if err != nil {
		return DriftCheck{Listed: true}, err
	}
	drift, err := b.compareKernel(want)
	if err != nil {
		return DriftCheck{Listed: true}, err
	}
	if drift == nil {
		// Only other tables changed: checks skip the listing again until the next change.
		b.gens.vouch(gen)
	}
	return DriftCheck{Listed: true, Drift: drift}, nil
}

// tableExists asks the kernel over netlink whether family's fleetslice table exists.
func tableExists(f knftables.Family) (bool, error) {
	tf := nftables.TableFamilyIPv4
	if f == knftables.IPv6Family {
		tf = nftables.TableFamilyIPv6
	}
	conn, err := nftables.New()
	if err != nil {
		return false, err
	}
	tables, err := conn.ListTablesOfFamily(tf)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == TableName }), nil
}

// canonicalTable is the agent's table reduced to what decides packets: chains with their
// hooks and their rules' expressions, sets and maps with their elements, as the kernel
// encodes them.
type canonicalTable struct {
	exists bool
	chains map[string][]string // name → hook line then one line per rule
	sets   map[string]setDigest
}

// setDigest is what a drift check compares of a set: the sum of its kernel elements' digests
// (see kernelElementDigest) and their number. Packets fill dynamic sets, so only their
// existence is compared.
type setDigest struct {
	dynamic bool
	sum     uint64
	n       int
}

// compareKernel reads the table back and compares it with want, cheapest parts first (the
// table, the names of its chains and sets, then each chain's rules, then each set's elements),
// and stops at the first difference.
func (b *netlinkBackend) compareKernel(want *canonicalTable) (*Drift, error) {
	conn, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, err
	}
	defer conn.CloseLasting()
	tables, err := conn.ListTablesOfFamily(b.table.Family)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == TableName }) {
		if want.exists {
			return &Drift{Kind: DriftTableMissing, Detail: "table " + TableName + " is gone"}, nil
		}
		return nil, nil
	}
	allChains, err := conn.ListChainsOfTableFamily(b.table.Family)
	if err != nil {
		return nil, err
	}
	var chains []*nftables.Chain
	for _, c := range allChains {
		if c.Table.Name == TableName {
			chains = append(chains, c)
		}
	}
	sets, err := conn.GetSets(b.table)
	if err != nil {
		return nil, err
	}
	chainName := func(c *nftables.Chain) string { return c.Name }
	if d := compareNames("chain", want.chains, chains, chainName); d != nil {
		return d, nil
	}
	if d := compareNames("set", want.sets, sets, func(s *nftables.Set) string { return s.Name }); d != nil {
		return d, nil
	}
	fam := byte(b.table.Family)
	for _, c := range chains {
		rules, err := conn.GetRules(b.table, c)
		if err != nil {
			return nil, fmt.Errorf("listing chain %s: %w", c.Name, err)
		}
		lines := []string{hookLine(c)}
		for _, r := range rules {
			line, err := exprLine(fam, r.Exprs)
			if err != nil {
				return nil, fmt.Errorf("chain %s: %w", c.Name, err)
			}
			lines = append(lines, line)
		}
		if d := compareLines("chain", c.Name, "rules", want.chains[c.Name], lines, 1); d != nil {
			return d, nil
		}
	}
	return b.compareSets(conn, sets, want.sets)
}

// compareSets compares each set's elements with the model's digest of them.
func (b *netlinkBackend) compareSets(conn *nftables.Conn, sets []*nftables.Set, want map[string]setDigest) (*Drift, error) {
	for _, s := range sets {
		w := want[s.Name]
		if s.HasTimeout || s.Dynamic || w.dynamic {
			// Packets fill the affinity sets; only their existence is the agent's.
			if (s.HasTimeout || s.Dynamic) != w.dynamic {
				return &Drift{Kind: DriftContentChanged, Detail: "set " + s.Name + ": its type differs"}, nil
			}
			continue
		}
		elems, err := conn.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("listing set %s: %w", s.Name, err)
		}
		got := setDigest{n: len(elems)}
		verdicts := b.sets[s.Name] != nil && b.sets[s.Name].Verdict
		for i := range elems {
			if verdicts && elems[i].VerdictData == nil {
				elems[i].VerdictData, elems[i].Val = verdictFromData(elems[i].Val), nil
			}
			got.sum += b.kernelElementDigest(&elems[i])
		}
		switch {
		case got.n != w.n:
			return &Drift{Kind: DriftContentChanged, Detail: fmt.Sprintf("set %s has %d elements, want %d", s.Name, got.n, w.n)}, nil
		case got.sum != w.sum:
			return &Drift{Kind: DriftContentChanged, Detail: "set " + s.Name + ": its elements differ"}, nil
		}
	}
	return nil, nil
}

func compareNames[T, V any](kind string, want map[string]V, got []T, name func(T) string) *Drift {
	seen := make(map[string]bool, len(got))
	for _, g := range got {
		n := name(g)
		seen[n] = true
		if _, ok := want[n]; !ok {
			return &Drift{Kind: DriftContentChanged, Detail: kind + " " + n + " was added"}
		}
	}
	for _, n := range sortedKeys(want) {
		if !seen[n] {
			return &Drift{Kind: DriftContentChanged, Detail: kind + " " + n + " is missing"}
		}
	}
	return nil
}

// compareLines compares one chain's canonical lines; header lines precede the items.
func compareLines(kind, name, items string, want, got []string, header int) *Drift {
	switch {
	case len(got) != len(want):
		return &Drift{Kind: DriftContentChanged, Detail: fmt.Sprintf("%s %s has %d %s, want %d", kind, name, len(got)-header, items, len(want)-header)}
	case !slices.Equal(got, want):
		return &Drift{Kind: DriftContentChanged, Detail: fmt.Sprintf("%s %s: its %s differ", kind, name, items)}
	}
	return nil
}

// expected renders the model in the canonical form listKernel reads.
func (b *netlinkBackend) expected() (*canonicalTable, error) {
	m := b.model
	out := &canonicalTable{exists: m.exists, chains: map[string][]string{}, sets: map[string]setDigest{}}
	fam := byte(b.table.Family)
	noID := func(string) uint32 { return 0 } // the kernel never lists set ids
	for name, c := range m.chains {
		nc, err := netlinkenc.Chain(b.table, c.def)
		if err != nil {
			return nil, err
		}
		lines := []string{hookLine(nc)}
		for _, r := range c.rules {
			exprs, err := netlinkenc.Exprs(b.fam.rs, r, noID)
			if err != nil {
				return nil, err
			}
			line, err := exprLine(fam, exprs)
			if err != nil {
				return nil, err
			}
			lines = append(lines, line)
		}
		out.chains[name] = lines
	}
	if m.err != nil {
		return nil, m.err
	}
	for name, s := range m.sets {
		out.sets[name] = setDigest{dynamic: s.dynamic, sum: s.sum, n: s.pieces}
	}
	return out, nil
}

// Compile-time check: only the netlink backend reads tables back.
var _ driftChecker = (*netlinkBackend)(nil)
