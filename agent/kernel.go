package agent

import (
	"context"
	"fmt"
	"sync"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// OpenFunc opens the kernel's nftables table for a family; dataplane.Open
// is the real one.
type OpenFunc func(family knftables.Family) (knftables.Interface, error)

// NewKernelDataplane returns a Dataplane for opts.Family that opens nftables
// on its first sync and, while that fails (nft missing or too old, no
// privilege, a kernel without nf_tables), on every later one. The agent
// retries failed syncs with backoff, so a node becomes ready as soon as the
// cause is fixed, without a restart. open nil means dataplane.Open.
func NewKernelDataplane(opts dataplane.Options, open OpenFunc) Dataplane {
	if open == nil {
		open = dataplane.Open
	}
	if opts.Family == "" {
		opts.Family = knftables.IPv4Family
	}
	return &kernelDataplane{opts: opts, open: open, newSyncer: dataplane.New}
}

// NewKernelNftDataplane is NewKernelDataplane for the kernel's nft program (open nil means
// dataplane.Open): its Syncer also checks the table for drift (see dataplane.NewKernelNft).
func NewKernelNftDataplane(opts dataplane.Options, open OpenFunc) Dataplane {
	k := NewKernelDataplane(opts, open).(*kernelDataplane)
	k.newSyncer = dataplane.NewKernelNft
	return k
}

type kernelDataplane struct {
	mu        sync.Mutex
	opts      dataplane.Options
	open      OpenFunc
	newSyncer func(knftables.Interface, dataplane.Options) (*dataplane.Syncer, error)
	syncer    *dataplane.Syncer
}

// CheckDrift checks once nftables has been opened; before, the first sync is a full one anyway.
func (k *kernelDataplane) CheckDrift(ctx context.Context) (dataplane.DriftCheck, error) {
	k.mu.Lock()
	s := k.syncer
	k.mu.Unlock()
	if s == nil {
		return dataplane.DriftCheck{}, nil
	}
	return s.CheckDrift(ctx)
}

func (k *kernelDataplane) Sync(ctx context.Context, services []dataplane.Service, full bool) (dataplane.Stats, error) {
	k.mu.Lock()
	if k.syncer == nil {
		nft, err := k.open(k.opts.Family)
		if err != nil {
			k.mu.Unlock()
			return dataplane.Stats{}, fmt.Errorf("%w (install the nftables package and run the agent with CAP_NET_ADMIN, or use --dataplane=dry-run)", err)
		}
		s, err := k.newSyncer(nft, k.opts)
		if err != nil {
			k.mu.Unlock()
			return dataplane.Stats{}, err
		}
		k.syncer = s
	}
	s := k.syncer
	k.mu.Unlock()
	return s.Sync(ctx, services, full)
}

// SyncChanges passes the changes on once nftables has been opened; before, the first sync needs
// every Service.
func (k *kernelDataplane) SyncChanges(ctx context.Context, updated []dataplane.Service, removed []string) (dataplane.Stats, error) {
	k.mu.Lock()
	s := k.syncer
	k.mu.Unlock()
	if s == nil {
		return dataplane.Stats{}, dataplane.ErrNeedsEverything
	}
	return s.SyncChanges(ctx, updated, removed)
}

// DeleteTables removes the fleetslice table of each family from the kernel,
// and with it every rule the agent wrote; a missing table is no error. The
// agent never does this on its own: on restart the old rules keep traffic
// flowing until the first sync replaces them. open nil means dataplane.Open.
func DeleteTables(ctx context.Context, open OpenFunc, families ...knftables.Family) error {
	if open == nil {
		open = dataplane.Open
	}
	for _, fam := range families {
		nft, err := open(fam)
		if err != nil {
			return err
		}
		tx := nft.NewTransaction()
		// Adding first makes the delete succeed whether or not it exists.
		tx.Add(&knftables.Table{})
		tx.Delete(&knftables.Table{})
		if err := nft.Run(ctx, tx); err != nil {
			return fmt.Errorf("deleting table %s %s: %w", fam, dataplane.TableName, err)
		}
	}
	return nil
}

var (
	_ ChangesDataplane = (*dataplane.Syncer)(nil)
	_ ChangesDataplane = (*dataplane.DryRun)(nil)
	_ ChangesDataplane = (*kernelDataplane)(nil)
)
