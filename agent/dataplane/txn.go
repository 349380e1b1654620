package dataplane

import (
	"context"

	"sigs.k8s.io/knftables"
)

// opVerb is what an operation does to its object.
type opVerb int

const (
	opAdd opVerb = iota
	opDelete
	opFlush
)

// op is one operation of a sync's transaction.
type op struct {
	verb opVerb
	obj  knftables.Object
}

// txn collects a sync's operations, in order, before a Backend applies them all at once. The
// Syncer plans with knftables' object types; a Backend decides how they reach the kernel.
type txn struct{ ops []op }

func (t *txn) Add(obj knftables.Object)    { t.ops = append(t.ops, op{opAdd, obj}) }
func (t *txn) Delete(obj knftables.Object) { t.ops = append(t.ops, op{opDelete, obj}) }
func (t *txn) Flush(obj knftables.Object)  { t.ops = append(t.ops, op{opFlush, obj}) }

// Backend applies a sync's operations to the fleetslice table of one family as one atomic
// transaction: all of them or, on error, none. It is the seam between planning (the Syncer)
// and the kernel: knftables (the nft program, or knftables' in-memory fake for tests and dry
// runs) or netlink (NewNetlinkBackend).
type Backend interface {
	apply(ctx context.Context, ops []op) error
	// clients lists the entries of an affinity map (see forget.go).
	clients(ctx context.Context, mapName string) ([]clientEntry, error)
}

// knftablesBackend runs operations as one knftables transaction.
type knftablesBackend struct{ nft knftables.Interface }

func (k knftablesBackend) apply(ctx context.Context, ops []op) error {
	tx := k.nft.NewTransaction()
	for _, o := range ops {
		switch o.verb {
		case opAdd:
			tx.Add(o.obj)
		case opDelete:
			tx.Delete(o.obj)
		case opFlush:
			tx.Flush(o.obj)
		}
	}
	return k.nft.Run(ctx, tx)
}
