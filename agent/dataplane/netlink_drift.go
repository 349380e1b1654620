package dataplane

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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

// ErrDriftUnsupported is returned by CheckDrift for backends that cannot read the table back
// (the nft program backend and the in-memory fake).
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
	res.Family = string(s.fam.nft)
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

// noteGeneration remembers the generation the backend's last batch produced. Another writer
// committing between the batch and this read is missed until the next write: the periodic
// full sync still repairs whatever it changed.
func (b *netlinkBackend) noteGeneration() {
	gen, err := generation()
	b.gen, b.genKnown = gen, err == nil
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
	if b.genKnown && gen == b.gen {
		return DriftCheck{}, nil
	}
	got, err := b.listKernel()
	if err != nil {
		return DriftCheck{Listed: true}, err
	}
	want, err := b.expected()
	if err != nil {
		return DriftCheck{Listed: true}, err
	}
	res := DriftCheck{Listed: true, Drift: compareTables(want, got)}
	if res.Drift == nil {
		// Only other tables changed: checks skip the listing again until the next change.
		b.gen, b.genKnown = gen, true
	}
	return res, nil
}

// canonicalTable is a table reduced to what decides packets: chains with their hooks and
// their rules' expressions, sets and maps with their elements, as the kernel encodes them.
type canonicalTable struct {
	exists bool
	chains map[string][]string // name → hook line then one line per rule
	sets   map[string][]string // name → sorted elements; nil for dynamic sets
}

func (b *netlinkBackend) listKernel() (*canonicalTable, error) {
	conn, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, err
	}
	defer conn.CloseLasting()
	out := &canonicalTable{chains: map[string][]string{}, sets: map[string][]string{}}
	tables, err := conn.ListTablesOfFamily(b.table.Family)
	if err != nil {
		return nil, err
	}
	out.exists = slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == TableName })
	if !out.exists {
		return out, nil
	}
	chains, err := conn.ListChainsOfTableFamily(b.table.Family)
	if err != nil {
		return nil, err
	}
	fam := byte(b.table.Family)
	for _, c := range chains {
		if c.Table.Name != TableName {
			continue
		}
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
		out.chains[c.Name] = lines
	}
	sets, err := conn.GetSets(b.table)
	if err != nil {
		return nil, err
	}
	for _, s := range sets {
		if s.HasTimeout || s.Dynamic {
			out.sets[s.Name] = nil
			continue
		}
		elems, err := conn.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("listing set %s: %w", s.Name, err)
		}
		if d := b.sets[s.Name]; d != nil && d.verdict {
			for i := range elems {
				if elems[i].VerdictData == nil {
					elems[i].VerdictData, elems[i].Val = verdictFromData(elems[i].Val), nil
				}
			}
		}
		out.sets[s.Name] = elementLines(elems)
	}
	return out, nil
}

// expected renders the model in the canonical form listKernel reads.
func (b *netlinkBackend) expected() (*canonicalTable, error) {
	m := b.model
	out := &canonicalTable{exists: m.exists, chains: map[string][]string{}, sets: map[string][]string{}}
	fam := byte(b.table.Family)
	noID := func(string) uint32 { return 0 } // the kernel never lists set ids
	for name, c := range m.chains {
		nc := &nftables.Chain{Name: name, Table: b.table}
		if err := baseChain(nc, c.def); err != nil {
			return nil, err
		}
		lines := []string{hookLine(nc)}
		for _, r := range c.rules {
			exprs, err := compileRule(r, b.fam, noID)
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
	for name, s := range m.sets {
		if s.dynamic {
			out.sets[name] = nil
			continue
		}
		d := b.sets[name]
		if d == nil {
			return nil, fmt.Errorf("no type for set %s", name)
		}
		var elems []nftables.SetElement
		for key, value := range s.elems {
			enc, err := d.encode(strings.Split(key, " . "), value, false)
			if err != nil {
				return nil, err
			}
			elems = append(elems, enc...)
		}
		out.sets[name] = elementLines(elems)
	}
	return out, nil
}

// verdictFromData decodes a verdict map's element data, which the nftables library returns
// as the kernel's attributes (a code, then for jump and goto a chain) instead of a Verdict.
func verdictFromData(data []byte) *expr.Verdict {
	v := &expr.Verdict{}
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return v
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			v.Kind = expr.VerdictKind(int32(ad.Uint32()))
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = ad.String()
		}
	}
	return v
}

func hookLine(c *nftables.Chain) string {
	if c.Hooknum == nil {
		return "regular"
	}
	prio := int32(0)
	if c.Priority != nil {
		prio = int32(*c.Priority)
	}
	return fmt.Sprintf("type %s hook %d priority %d", c.Type, uint32(*c.Hooknum), prio)
}

func exprLine(fam byte, exprs []expr.Any) (string, error) {
	var sb strings.Builder
	for _, e := range exprs {
		data, err := expr.Marshal(fam, normalizeExpr(e))
		if err != nil {
			return "", fmt.Errorf("encoding %T: %w", e, err)
		}
		sb.WriteString(hex.EncodeToString(data))
		sb.WriteByte(' ')
	}
	return sb.String(), nil
}

// normalizeExpr spells an expression as the kernel lists it back: a NAT statement given only a
// minimum address or port lists that value as its maximum too, with the port flagged as
// specified.
func normalizeExpr(e expr.Any) expr.Any {
	nat, ok := e.(*expr.NAT)
	if !ok {
		return e
	}
	n := *nat
	if n.RegAddrMax == 0 {
		n.RegAddrMax = n.RegAddrMin
	}
	if n.RegProtoMax == 0 {
		n.RegProtoMax = n.RegProtoMin
	}
	n.Specified = n.Specified || n.RegProtoMin != 0
	return &n
}

func elementLines(elems []nftables.SetElement) []string {
	lines := make([]string, 0, len(elems))
	for _, e := range elems {
		line := hex.EncodeToString(e.Key) + "-" + hex.EncodeToString(e.KeyEnd) + ":" + hex.EncodeToString(e.Val)
		if e.VerdictData != nil {
			line += fmt.Sprintf(" verdict %d %s", e.VerdictData.Kind, e.VerdictData.Chain)
		}
		if e.IntervalEnd {
			line += " end"
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return lines
}

// compareTables returns the first difference between what the agent wrote and what the kernel
// holds, or nil.
func compareTables(want, got *canonicalTable) *Drift {
	if want.exists && !got.exists {
		return &Drift{Kind: DriftTableMissing, Detail: "table " + TableName + " is gone"}
	}
	changed := func(format string, args ...any) *Drift {
		return &Drift{Kind: DriftContentChanged, Detail: fmt.Sprintf(format, args...)}
	}
	for _, name := range sortedKeys(got.chains) {
		if _, ok := want.chains[name]; !ok {
			return changed("chain %s was added", name)
		}
	}
	for _, name := range sortedKeys(want.chains) {
		g, ok := got.chains[name]
		switch w := want.chains[name]; {
		case !ok:
			return changed("chain %s is missing", name)
		case len(g) != len(w):
			return changed("chain %s has %d rules, want %d", name, len(g)-1, len(w)-1)
		case !slices.Equal(g, w):
			return changed("chain %s: a rule or its hook differs", name)
		}
	}
	for _, name := range sortedKeys(got.sets) {
		if _, ok := want.sets[name]; !ok {
			return changed("set %s was added", name)
		}
	}
	for _, name := range sortedKeys(want.sets) {
		g, ok := got.sets[name]
		switch w := want.sets[name]; {
		case !ok:
			return changed("set %s is missing", name)
		case len(g) != len(w):
			return changed("set %s has %d elements, want %d", name, len(g), len(w))
		case !slices.Equal(g, w):
			return changed("set %s: an element differs", name)
		}
	}
	return nil
}

// Compile-time check: only the netlink backend reads tables back.
var _ driftChecker = (*netlinkBackend)(nil)
