package dataplane

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/netlinkenc"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// NewNetlinkBackend returns a Backend that programs family's fleetslice table over netlink
// (github.com/google/nftables), in the network namespace of the thread that calls Sync. It
// needs no nft program: each transaction is one netlink batch, which the kernel applies
// atomically, and its cost is that of the change, since nothing is read back from the kernel
// (the nft program parses and checks the whole existing table on every transaction).
func NewNetlinkBackend(f knftables.Family) (Backend, error) {
	return newNetlinkBackend(f, nil)
}

// dialFunc answers a batch's messages in place of the kernel (google/nftables' test dial).
type dialFunc = func(req []netlink.Message) ([]netlink.Message, error)

// newNetlinkBackend is NewNetlinkBackend talking to dial instead of the kernel when dial is set:
// tests see every message the backend sends.
func newNetlinkBackend(f knftables.Family, dial dialFunc) (*netlinkBackend, error) {
	fam, ok := familyFor(f)
	if !ok || f == "" {
		return nil, fmt.Errorf("dataplane: unsupported family %q (want ip or ip6)", f)
	}
	tf := nftables.TableFamilyIPv4
	if fam.rs == ruleset.IPv6 {
		tf = nftables.TableFamilyIPv6
	}
	b := &netlinkBackend{fam: fam, table: &nftables.Table{Name: TableName, Family: tf}, sets: map[string]*netlinkenc.SetDef{},
		dial: dial, seed: maphash.MakeSeed(), gens: newGenTracker(nil)}
	b.model = newTableModel(b.elementDigest)
	return b, nil
}

// conn opens a connection to the kernel, or to the test's dial.
func (b *netlinkBackend) conn(opts ...nftables.ConnOption) (*nftables.Conn, error) {
	if b.dial != nil {
		return nftables.New(nftables.WithTestDial(b.dial))
	}
	return nftables.New(opts...)
}

type netlinkBackend struct {
	mu    sync.Mutex
	fam   family
	table *nftables.Table
	// sets holds the type of every set and map the last successful batches left in the
	// table, to encode elements of sets a batch does not define itself.
	sets map[string]*netlinkenc.SetDef
	// model is what the accepted batches left in the table, and gens the ruleset generation at
	// which the table was last known to be that: a drift check compares the kernel with them
	// (netlink_drift.go).
	model *tableModel
	seed  maphash.Seed // of the elements' digests (see kernelElementDigest)
	// digestScratch holds the element elementDigest encoded last (under mu): the model digests
	// every element of the table after a full sync.
	digestScratch []nftables.SetElement
	gens          *genTracker
	dial          dialFunc  // nil: the kernel
	list          listTable // nil: readNetlinkTable
}

// batch is one transaction under construction.
type batch struct {
	b       *netlinkBackend
	conn    *nftables.Conn
	added   map[string]*nftables.Set      // sets and maps defined in this batch
	defs    map[string]*netlinkenc.SetDef // their types
	deleted map[string]bool
	dropped bool // the table was deleted: nothing from before counts
	// known holds the types of the sets the table holds after a full sync that compared it
	// with the kernel's (whose batch defines only the sets that were missing).
	known map[string]*netlinkenc.SetDef
	// log holds, when logging, each element operation's identity and digest as it was encoded,
	// for the model (tableModel.applyLogged), 32 bytes an element; logSets names their sets.
	logging  bool
	log      []loggedElement
	logSets  []string
	logIndex map[string]uint16
}

func (b *netlinkBackend) apply(ctx context.Context, ops, table []ruleset.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var t *batch
	var base genReading
	if len(ops) > 0 {
		if b.dial == nil {
			base = b.gens.before(ops, table)
		}
		var err error
		if t, err = b.send(ops, table); err != nil {
			return err
		}
	}
	if table != nil {
		b.adopt(table)
	} else {
		b.accepted(t, ops)
	}
	if b.dial == nil {
		b.gens.after(ops, base)
	}
	return nil
}

// send runs ops as one batch. The types of the sets table holds encode elements of sets the
// batch does not define.
func (b *netlinkBackend) send(ops, table []ruleset.Op) (*batch, error) {
	// The kernel answers every message of the batch; room for all answers (and for the
	// batch itself) keeps a large full sync from losing them.
	size := min(1<<20+ruleset.Count(ops)*1024, math.MaxInt32/2)
	conn, err := b.conn(nftables.WithSockOptions(func(c *netlink.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size),
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size))
		}); err != nil {
			return err
		}
		return serr
	}))
	if err != nil {
		return nil, err
	}
	t := &batch{b: b, conn: conn, added: map[string]*nftables.Set{}, defs: map[string]*netlinkenc.SetDef{}, deleted: map[string]bool{}}
	if table != nil {
		if t.known, err = b.defsOf(table); err != nil {
			return nil, err
		}
	} else if b.model.logs() {
		t.logging, t.log, t.logIndex = true, make([]loggedElement, 0, ruleset.Count(ops)), map[string]uint16{}
	}
	if err := t.ops(ops); err != nil {
		return nil, err
	}
	if err := conn.Flush(); err != nil {
		msg := err.Error()
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return nil, fmt.Errorf("netlink batch of %d operations refused: %s", ruleset.Count(ops), msg)
	}
	return t, nil
}

// accepted records what an accepted batch of ops left in the table.
func (b *netlinkBackend) accepted(t *batch, ops []ruleset.Op) {
	if t != nil {
		if t.dropped {
			clear(b.sets)
		}
		for name := range t.deleted {
			delete(b.sets, name)
		}
		for name, d := range t.defs {
			b.sets[name] = d
		}
		if t.logging {
			b.model.applyLogged(ops, t.log, t.logSets)
			return
		}
	}
	b.model.apply(ops)
}

// adopt makes table, what a full sync left, the backend's model and its sets' types.
func (b *netlinkBackend) adopt(table []ruleset.Op) {
	defs, _ := b.defsOf(table) // encoded already, by the planner and by send
	clear(b.sets)
	for name, d := range defs {
		b.sets[name] = d
	}
	b.model.reset(table)
}

// defsOf is the type of every set table declares.
func (b *netlinkBackend) defsOf(table []ruleset.Op) (map[string]*netlinkenc.SetDef, error) {
	out := map[string]*netlinkenc.SetDef{}
	for _, o := range table {
		if s, ok := o.Obj.(*ruleset.Set); ok && o.Verb == ruleset.Add {
			d, err := netlinkenc.Def(b.fam.rs, s)
			if err != nil {
				return nil, fmt.Errorf("netlink backend: set %s: %w", s.Name, err)
			}
			out[s.Name] = d
		}
	}
	return out, nil
}

// ops adds every operation to the batch, each run's elements spelled out one at a time, so that
// the batch holds their messages and not the elements as well.
func (t *batch) ops(ops []ruleset.Op) error {
	var pend pendingElements
	for _, o := range ops {
		var err error
		switch obj := o.Obj.(type) {
		case *ruleset.Element:
			err = pend.add(t, o.Verb, obj)
		case *ruleset.Elements:
			err = t.run(&pend, o.Verb, obj)
		default:
			if err = pend.flush(t); err == nil {
				err = t.object(o)
			}
		}
		if err != nil {
			return err
		}
	}
	return pend.flush(t)
}

// def returns the type of set or map name as this batch sees it.
func (t *batch) def(name string) (*netlinkenc.SetDef, error) {
	if d := t.defs[name]; d != nil {
		return d, nil
	}
	if d := t.b.sets[name]; d != nil && !t.dropped && !t.deleted[name] {
		return d, nil
	}
	if d := t.known[name]; d != nil && !t.dropped && !t.deleted[name] {
		return d, nil
	}
	return nil, fmt.Errorf("no set or map %q in table %s", name, TableName)
}

func (t *batch) setID(name string) uint32 {
	if s := t.added[name]; s != nil {
		return s.ID
	}
	return 0
}

func (t *batch) object(o ruleset.Op) error {
	tbl := t.b.table
	switch obj := o.Obj.(type) {
	case *ruleset.Table:
		switch o.Verb {
		case ruleset.Add:
			t.conn.AddTable(tbl)
		case ruleset.Delete:
			t.conn.DelTable(tbl)
			t.dropped = true
			clear(t.added)
			clear(t.defs)
		default:
			t.conn.FlushTable(tbl)
		}
	case *ruleset.Chain:
		c, err := netlinkenc.Chain(tbl, obj)
		if err != nil {
			return fmt.Errorf("netlink backend: %w", err)
		}
		switch o.Verb {
		case ruleset.Add:
			t.conn.AddChain(c)
		case ruleset.Delete:
			t.conn.DelChain(c)
		default:
			t.conn.FlushChain(c)
		}
	case *ruleset.Rule:
		if o.Verb != ruleset.Add {
			return fmt.Errorf("netlink backend: rules are only added")
		}
		exprs, err := netlinkenc.Exprs(t.b.fam.rs, obj.Stmts, t.setID)
		if err != nil {
			return fmt.Errorf("netlink backend: chain %s: %w", obj.Chain, err)
		}
		t.conn.AddRule(&nftables.Rule{Table: tbl, Chain: &nftables.Chain{Name: obj.Chain, Table: tbl}, Exprs: exprs})
	case *ruleset.Set:
		return t.set(o.Verb, obj)
	default:
		return fmt.Errorf("netlink backend: unsupported object %T", o.Obj)
	}
	return nil
}

func (t *batch) set(verb ruleset.Verb, obj *ruleset.Set) error {
	name := obj.Name
	switch verb {
	case ruleset.Delete:
		t.conn.DelSet(&nftables.Set{Table: t.b.table, Name: name})
		delete(t.added, name)
		delete(t.defs, name)
		t.deleted[name] = true
		return nil
	case ruleset.Flush:
		t.conn.FlushSet(&nftables.Set{Table: t.b.table, Name: name})
		return nil
	}
	s, d, err := netlinkenc.Set(t.b.fam.rs, t.b.table, obj)
	if err != nil {
		return fmt.Errorf("netlink backend: %w", err)
	}
	if err := t.conn.AddSet(s, nil); err != nil {
		return err
	}
	t.added[name], t.defs[name] = s, d
	delete(t.deleted, name)
	return nil
}

// NewNetlink returns a Syncer for opts.Family that programs the kernel over netlink.
func NewNetlink(opts Options) (*Syncer, error) {
	f := opts.Family
	if f == "" {
		f = knftables.IPv4Family
	}
	b, err := NewNetlinkBackend(f)
	if err != nil {
		return nil, err
	}
	return NewWithBackend(b, opts)
}

// ProbeNetlink reports whether nftables can be used over netlink here: it lists the tables of
// family (only their names), which needs nf_tables in the kernel and CAP_NET_ADMIN.
func ProbeNetlink(family knftables.Family) error {
	b, err := NewNetlinkBackend(family)
	if err != nil {
		return err
	}
	conn, err := nftables.New()
	if err == nil {
		_, err = conn.ListTablesOfFamily(b.(*netlinkBackend).table.Family)
	}
	if err != nil {
		return fmt.Errorf("dataplane: nftables over netlink unavailable for family %s: %w", family, err)
	}
	return nil
}

// DeleteTableNetlink deletes family's fleetslice table over netlink; a missing table is no
// error.
func DeleteTableNetlink(ctx context.Context, family knftables.Family) error {
	b, err := NewNetlinkBackend(family)
	if err != nil {
		return err
	}
	// Adding first makes the delete succeed whether or not the table exists.
	return b.apply(ctx, []ruleset.Op{{Verb: ruleset.Add, Obj: &ruleset.Table{}}, {Verb: ruleset.Delete, Obj: &ruleset.Table{}}}, nil)
}
