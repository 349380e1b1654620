package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sync"

	"github.com/google/nftables"
	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// NewKernelNft returns a Syncer that programs the kernel through nft, which must come from
// Open (the nft program, not a fake), and that can check its table for drift (CheckDrift).
// Its checks compare the table's structure: chains, the number of rules in each, sets and
// maps, and the number of elements in each; unlike the netlink backend's they do not notice
// a rule rewritten in place.
func NewKernelNft(nft knftables.Interface, opts Options) (*Syncer, error) {
	if nft == nil {
		return nil, fmt.Errorf("dataplane: nil nftables interface")
	}
	fam, ok := familyFor(opts.Family)
	if !ok {
		return nil, fmt.Errorf("dataplane: unsupported family %q (want ip or ip6)", opts.Family)
	}
	s, err := NewWithBackend(&nftKernelBackend{knftablesBackend: knftablesBackend{nft, fam.rs}, fam: fam, model: newTableModel(nil), gens: newGenTracker(nil)}, opts)
	if err != nil {
		return nil, err
	}
	s.nft = nft
	return s, nil
}

// nftKernelBackend is the knftables backend on a real kernel, keeping the model of its table
// and the ruleset generation its last transaction left, as the netlink backend does. A full
// sync reads its table over netlink (see netlink_image.go).
type nftKernelBackend struct {
	knftablesBackend
	fam   family
	mu    sync.Mutex
	model *tableModel
	gens  *genTracker
}

func (k *nftKernelBackend) apply(ctx context.Context, ops, table []ruleset.Op) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	base := k.gens.before(ops, table)
	if err := k.knftablesBackend.apply(ctx, ops, table); err != nil {
		return err
	}
	if table != nil {
		k.model.reset(table)
	} else {
		k.model.apply(ops)
	}
	k.gens.after(ops, base)
	return nil
}

func (k *nftKernelBackend) read(ctx context.Context) (*tableImage, speller, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	table := &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
	if k.fam.rs == ruleset.IPv6 {
		table.Family = nftables.TableFamilyIPv6
	}
	k.gens.noteRead()
	img, err := readNetlinkTable(table, k.model.size)
	return img, netlinkSpeller{fam: k.fam, table: table, nft: true}, err
}

// nftListing is the part of `nft -j list table` a structural comparison reads.
type nftListing struct {
	Nftables []struct {
		Chain *struct{ Name string }
		Rule  *struct{ Chain string }
		Set   *nftListedSet
		Map   *nftListedSet
	}
}

type nftListedSet struct {
	Name string
	Elem []json.RawMessage
}

func (k *nftKernelBackend) drift(ctx context.Context) (DriftCheck, error) {
	if err := ctx.Err(); err != nil {
		return DriftCheck{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.model.known {
		return DriftCheck{}, nil
	}
	gen, err := generation()
	if err != nil {
		return DriftCheck{}, err
	}
	if k.gens.at(gen) {
		return DriftCheck{}, nil
	}
	res := DriftCheck{Listed: true}
	out, err := exec.CommandContext(ctx, "nft", "-j", "list", "table", string(k.fam.nft), TableName).Output()
	if err != nil {
		// nft fails the same way for a missing table and for other trouble: ask the kernel.
		exists, lerr := tableExists(k.fam.nft)
		switch {
		case lerr != nil:
			return res, fmt.Errorf("listing table %s %s: %v (%w)", k.fam.nft, TableName, err, lerr)
		case exists:
			return res, fmt.Errorf("listing table %s %s: %w", k.fam.nft, TableName, err)
		case k.model.exists:
			res.Drift = &Drift{Kind: DriftTableMissing, Detail: "table " + TableName + " is gone"}
		}
		return res, nil
	}
	var listing nftListing
	if err := json.Unmarshal(out, &listing); err != nil {
		return res, fmt.Errorf("parsing nft's listing: %w", err)
	}
	got := &canonicalTable{exists: true, chains: map[string][]string{}, sets: map[string]setDigest{}}
	rules := map[string]int{}
	for _, o := range listing.Nftables {
		switch {
		case o.Chain != nil:
			got.chains[o.Chain.Name] = nil
		case o.Rule != nil:
			rules[o.Rule.Chain]++
		case o.Set != nil:
			got.sets[o.Set.Name] = setDigest{n: len(o.Set.Elem)}
		case o.Map != nil:
			got.sets[o.Map.Name] = setDigest{n: len(o.Map.Elem)}
		}
	}
	want := &canonicalTable{exists: k.model.exists, chains: map[string][]string{}, sets: map[string]setDigest{}}
	for name, c := range k.model.chains {
		want.chains[name] = nil
		if n := len(c.rules); n != rules[name] {
			res.Drift = &Drift{Kind: DriftContentChanged, Detail: fmt.Sprintf("chain %s has %d rules, want %d", name, rules[name], n)}
		}
	}
	for name, s := range k.model.sets {
		want.sets[name] = setDigest{dynamic: s.dynamic, n: s.pieces}
		if !s.dynamic && got.sets[name].n != len(s.elems) {
			if _, listed := got.sets[name]; listed {
				res.Drift = &Drift{Kind: DriftContentChanged, Detail: fmt.Sprintf("set %s has %d elements, want %d", name, got.sets[name].n, len(s.elems))}
			}
		}
	}
	if d := compareNames("chain", want.chains, sortedKeys(got.chains), func(n string) string { return n }); d != nil {
		res.Drift = d
	} else if d := compareNames("set", want.sets, sortedKeys(got.sets), func(n string) string { return n }); d != nil {
		res.Drift = d
	}
	if res.Drift == nil {
		k.gens.vouch(gen)
	}
	return res, nil
}

var _ driftChecker = (*nftKernelBackend)(nil)
