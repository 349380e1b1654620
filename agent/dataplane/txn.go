package dataplane

import (
	"context"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/nftext"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// txn collects a sync's operations, in order, before a Backend applies them all at once.
type txn struct{ ops []ruleset.Op }

func (t *txn) Add(obj ruleset.Object) { t.ops = append(t.ops, ruleset.Op{Verb: ruleset.Add, Obj: obj}) }
func (t *txn) Delete(obj ruleset.Object) {
	t.ops = append(t.ops, ruleset.Op{Verb: ruleset.Delete, Obj: obj})
}
func (t *txn) Flush(obj ruleset.Object) {
	t.ops = append(t.ops, ruleset.Op{Verb: ruleset.Flush, Obj: obj})
}

// Backend applies a sync's operations to the fleetslice table of one family as one atomic
// transaction: all of them or, on error, none. It is the seam between planning (the Syncer)
// and the kernel: knftables (the nft program, or knftables' in-memory fake for tests and dry
// runs) or netlink (NewNetlinkBackend). Both are given the same ruleset values and translate
// them their own way.
type Backend interface {
	// apply runs ops, when there are any. table is set after a full sync that did not rebuild
	// the table: every object the table holds once ops are applied, as a rebuild would write
	// them, for a backend that keeps a model of its table to start it over from.
	apply(ctx context.Context, ops, table []ruleset.Op) error
	// clients lists the entries of an affinity map (see forget.go); the Syncer reads them
	// before it plans, never while.
	clients(ctx context.Context, mapName string) ([]clientEntry, error)
	// read lists the table for a full sync to compare with, and the speller that spells what
	// the sync wants alike (see image.go); a nil image without an error means this backend
	// cannot read its table back, and full syncs rebuild it.
	read(ctx context.Context) (*tableImage, speller, error)
}

// knftablesBackend runs operations as one knftables transaction.
type knftablesBackend struct {
	nft knftables.Interface
	fam ruleset.Family
}

func (k knftablesBackend) apply(ctx context.Context, ops, _ []ruleset.Op) error {
	if len(ops) == 0 {
		return nil
	}
	tx := k.nft.NewTransaction()
	nftext.Transaction(tx, k.fam, ops)
	return k.nft.Run(ctx, tx)
}
