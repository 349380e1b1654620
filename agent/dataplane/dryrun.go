package dataplane

import (
	"context"
	"fmt"

	"sigs.k8s.io/knftables"
)

// DryRun is a Syncer that writes to an in-memory table instead of the
// kernel, for nodes without nftables and for simulated nodes
// (--dataplane=dry-run). It runs exactly the transactions the real dataplane
// would, so what it shows is what a real node would program.
type DryRun struct {
	*Syncer
	fake *knftables.Fake
}

// NewDryRun returns a DryRun for opts.Family.
func NewDryRun(opts Options) (*DryRun, error) {
	fam, ok := familyFor(opts.Family)
	if !ok {
		// Let New produce the error message.
		_, err := New(knftables.NewFake(knftables.IPv4Family, TableName), opts)
		return nil, err
	}
	fake := knftables.NewFake(fam.nft, TableName)
	s, err := New(fake, opts)
	if err != nil {
		return nil, err
	}
	return &DryRun{Syncer: s, fake: fake}, nil
}

// Ruleset returns the current table as nft commands ("add table …",
// "add chain …", "add rule …", "add element …"), sorted by object name.
func (d *DryRun) Ruleset() string { return d.fake.Dump() }

// LastTransaction returns the nft commands of the last transaction run,
// which is what an incremental sync would have sent to the kernel.
func (d *DryRun) LastTransaction() string {
	d.fake.RLock()
	defer d.fake.RUnlock()
	if d.fake.LastTransaction == nil {
		return ""
	}
	return d.fake.LastTransaction.String()
}

// Render returns the ruleset a full sync of services would write.
func Render(ctx context.Context, services []Service, opts Options) (string, Stats, error) {
	d, err := NewDryRun(opts)
	if err != nil {
		return "", Stats{}, err
	}
	stats, err := d.Sync(ctx, services, true)
	if err != nil {
		return "", stats, err
	}
	return d.Ruleset(), stats, nil
}

// Open returns a knftables.Interface for the kernel's fleetslice table in
// family, or an error that says why nftables cannot be used here (nft
// missing or older than 1.0.1, no permission, kernel without nf_tables).
func Open(family knftables.Family) (knftables.Interface, error) {
	if _, ok := familyFor(family); !ok || family == "" {
		return nil, fmt.Errorf("dataplane: unsupported family %q (want ip or ip6)", family)
	}
	nft, err := knftables.New(family, TableName)
	if err != nil {
		return nil, fmt.Errorf("dataplane: nftables unavailable for table %s %s: %w", family, TableName, err)
	}
	return nft, nil
}
