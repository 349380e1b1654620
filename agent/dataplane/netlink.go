package dataplane

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// NewNetlinkBackend returns a Backend that programs family's fleetslice table over netlink
// (github.com/google/nftables), in the network namespace of the thread that calls Sync. It
// needs no nft program: each transaction is one netlink batch, which the kernel applies
// atomically, and its cost is that of the change, since nothing is read back from the kernel
// (the nft program parses and checks the whole existing table on every transaction).
func NewNetlinkBackend(f knftables.Family) (Backend, error) {
	return newNetlinkBackend(f, nil)
}

// newNetlinkBackend is NewNetlinkBackend talking to dial instead of the kernel when dial is set:
// tests see every message the backend sends.
func newNetlinkBackend(f knftables.Family, dial nltest.Func) (*netlinkBackend, error) {
	fam, ok := familyFor(f)
	if !ok || f == "" {
		return nil, fmt.Errorf("dataplane: unsupported family %q (want ip or ip6)", f)
	}
	tf := nftables.TableFamilyIPv4
	if fam.selector == "ip6" {
		tf = nftables.TableFamilyIPv6
	}
	return &netlinkBackend{fam: fam, table: &nftables.Table{Name: TableName, Family: tf}, sets: map[string]*setDef{},
		model: newTableModel(), dial: dial}, nil
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
	sets map[string]*setDef
	// model is what the accepted batches left in the table, and gen the ruleset generation
	// the last one produced: a drift check compares the kernel with them (netlink_drift.go).
	model    *tableModel
	gen      uint32
	genKnown bool
	dial     nltest.Func // nil: the kernel
}

// batch is one transaction under construction.
type batch struct {
	b       *netlinkBackend
	conn    *nftables.Conn
	added   map[string]*nftables.Set // sets and maps defined in this batch
	defs    map[string]*setDef       // their types
	deleted map[string]bool
	dropped bool // the table was deleted: nothing from before counts
}

func (b *netlinkBackend) apply(ctx context.Context, ops []op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The kernel answers every message of the batch; room for all answers (and for the
	// batch itself) keeps a large full sync from losing them.
	size := min(1<<20+len(ops)*1024, math.MaxInt32/2)
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
		return err
	}
	t := &batch{b: b, conn: conn, added: map[string]*nftables.Set{}, defs: map[string]*setDef{}, deleted: map[string]bool{}}
	for i := 0; i < len(ops); i++ {
		if el, ok := ops[i].obj.(*knftables.Element); ok {
			// Consecutive element operations on one set share messages.
			j := i + 1
			for j < len(ops) && sameElementTarget(ops[j], ops[i].verb, el) {
				j++
			}
			if err := t.elements(ops[i].verb, ops[i:j]); err != nil {
				return err
			}
			i = j - 1
			continue
		}
		if err := t.object(ops[i]); err != nil {
			return err
		}
	}
	if err := conn.Flush(); err != nil {
		msg := err.Error()
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return fmt.Errorf("netlink batch of %d operations refused: %s", len(ops), msg)
	}
	if t.dropped {
		clear(b.sets)
	}
	for name := range t.deleted {
		delete(b.sets, name)
	}
	for name, d := range t.defs {
		b.sets[name] = d
	}
	b.model.apply(ops)
	if b.dial == nil {
		b.noteGeneration()
	}
	return nil
}

func sameElementTarget(o op, verb opVerb, el *knftables.Element) bool {
	e, ok := o.obj.(*knftables.Element)
	return ok && o.verb == verb && e.Set == el.Set && e.Map == el.Map
}

// def returns the type of set or map name as this batch sees it.
func (t *batch) def(name string) (*setDef, error) {
	if d := t.defs[name]; d != nil {
		return d, nil
	}
	if d := t.b.sets[name]; d != nil && !t.dropped && !t.deleted[name] {
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

func (t *batch) object(o op) error {
	tbl := t.b.table
	switch obj := o.obj.(type) {
	case *knftables.Table:
		switch o.verb {
		case opAdd:
			t.conn.AddTable(tbl)
		case opDelete:
			t.conn.DelTable(tbl)
			t.dropped = true
			clear(t.added)
			clear(t.defs)
		default:
			t.conn.FlushTable(tbl)
		}
	case *knftables.Chain:
		c := &nftables.Chain{Name: obj.Name, Table: tbl}
		switch o.verb {
		case opAdd:
			if err := baseChain(c, obj); err != nil {
				return err
			}
			t.conn.AddChain(c)
		case opDelete:
			t.conn.DelChain(c)
		default:
			t.conn.FlushChain(c)
		}
	case *knftables.Rule:
		if o.verb != opAdd {
			return fmt.Errorf("netlink backend: rules are only added")
		}
		exprs, err := compileRule(obj.Rule, t.b.fam, t.setID)
		if err != nil {
			return err
		}
		t.conn.AddRule(&nftables.Rule{Table: tbl, Chain: &nftables.Chain{Name: obj.Chain, Table: tbl}, Exprs: exprs})
	case *knftables.Set:
		return t.set(o.verb, obj.Name, obj.Type, obj.Flags, obj.Timeout, false)
	case *knftables.Map:
		spec := obj.Type
		if obj.TypeOf != "" {
			spec = obj.TypeOf
		}
		return t.set(o.verb, obj.Name, spec, obj.Flags, obj.Timeout, obj.TypeOf != "")
	default:
		return fmt.Errorf("netlink backend: unsupported object %T", o.obj)
	}
	return nil
}

func baseChain(c *nftables.Chain, obj *knftables.Chain) error {
	if obj.Type == nil {
		return nil
	}
	hooks := map[knftables.BaseChainHook]*nftables.ChainHook{
		knftables.PreroutingHook: nftables.ChainHookPrerouting, knftables.InputHook: nftables.ChainHookInput,
		knftables.ForwardHook: nftables.ChainHookForward, knftables.OutputHook: nftables.ChainHookOutput,
		knftables.PostroutingHook: nftables.ChainHookPostrouting,
	}
	prios := map[knftables.BaseChainPriority]nftables.ChainPriority{
		knftables.DNATPriority: -100, knftables.SNATPriority: 100, knftables.FilterPriority: 0,
	}
	hook, prio := hooks[ptrValue(obj.Hook)], prios[ptrValue(obj.Priority)]
	if hook == nil || obj.Priority == nil {
		return fmt.Errorf("netlink backend: chain %s: unsupported hook or priority", obj.Name)
	}
	if _, ok := prios[*obj.Priority]; !ok {
		return fmt.Errorf("netlink backend: chain %s: unsupported priority %q", obj.Name, *obj.Priority)
	}
	c.Type, c.Hooknum, c.Priority = nftables.ChainType(*obj.Type), hook, nftables.ChainPriorityRef(prio)
	return nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (t *batch) set(verb opVerb, name, spec string, flags []knftables.SetFlag, timeout *time.Duration, typeOf bool) error {
	s := &nftables.Set{Table: t.b.table, Name: name}
	switch verb {
	case opDelete:
		t.conn.DelSet(s)
		delete(t.added, name)
		delete(t.defs, name)
		t.deleted[name] = true
		return nil
	case opFlush:
		t.conn.FlushSet(s)
		return nil
	}
	d, err := parseSetSpec(spec, typeOf)
	if err != nil {
		return fmt.Errorf("netlink backend: set %s: %w", name, err)
	}
	for _, f := range flags {
		switch f {
		case knftables.IntervalFlag:
			d.interval = true
		case knftables.DynamicFlag:
			s.Dynamic = true
		case knftables.TimeoutFlag:
			s.HasTimeout = true
		default:
			return fmt.Errorf("netlink backend: set %s: unsupported flag %q", name, f)
		}
	}
	if timeout != nil {
		s.HasTimeout, s.Timeout = true, *timeout
	}
	if err := d.describe(s); err != nil {
		return fmt.Errorf("netlink backend: set %s: %w", name, err)
	}
	if err := t.conn.AddSet(s, nil); err != nil {
		return err
	}
	t.added[name], t.defs[name] = s, d
	delete(t.deleted, name)
	return nil
}

// elements adds or deletes the elements of ops, all of one set, a few hundred per message (a
// netlink attribute holds at most 64 KiB).
func (t *batch) elements(verb opVerb, ops []op) error {
	first := ops[0].obj.(*knftables.Element)
	name := first.Set + first.Map
	d, err := t.def(name)
	if err != nil {
		return err
	}
	s := t.added[name]
	if s == nil {
		s = &nftables.Set{Table: t.b.table, Name: name}
		if err := d.describe(s); err != nil {
			return err
		}
	}
	const perMessage = 256
	var vals []nftables.SetElement
	flush := func() error {
		if len(vals) == 0 {
			return nil
		}
		var err error
		switch verb {
		case opAdd:
			err = t.conn.SetAddElements(s, vals)
		case opDelete:
			err = t.conn.SetDeleteElements(s, vals)
		default:
			err = fmt.Errorf("netlink backend: elements are only added or deleted")
		}
		vals = vals[:0]
		return err
	}
	for _, o := range ops {
		el := o.obj.(*knftables.Element)
		encoded, err := d.encode(el.Key, el.Value, verb == opDelete)
		if err != nil {
			return fmt.Errorf("netlink backend: element of %s: %w", name, err)
		}
		if el.Comment != nil && verb == opAdd {
			encoded[0].Comment = *el.Comment
		}
		vals = append(vals, encoded...)
		if len(vals) >= perMessage {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
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
	return b.apply(ctx, []op{{opAdd, &knftables.Table{}}, {opDelete, &knftables.Table{}}})
}
