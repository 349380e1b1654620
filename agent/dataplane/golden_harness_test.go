package dataplane

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// goldenRun drives two Syncers in step with the same input and clock: one through knftables
// (its fake, whose transactions are recorded as nft text) and one through the netlink backend
// talking to goldenNetlink instead of the kernel. Affinity clients are recorded in the fake and
// served to the netlink Syncer's reads from it, so both see the same kernel.
type goldenRun struct {
	t       *testing.T
	fam     family
	start   time.Time
	clock   *fakeClock
	fake    *knftables.Fake
	nft     *goldenNFT
	nl      *goldenNetlink
	viaNft  *Syncer
	viaNl   *Syncer
	out     strings.Builder
	lastErr error
}

func newGoldenRun(t *testing.T, opts Options) *goldenRun {
	t.Helper()
	fam, _ := familyFor(opts.Family)
	g := &goldenRun{t: t, fam: fam, clock: &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	g.start = g.clock.now
	opts.Clock = g.clock.Now
	g.fake = knftables.NewFake(fam.nft, TableName)
	g.nft = &goldenNFT{Fake: g.fake}
	g.nl = &goldenNetlink{fake: g.fake, ids: map[uint32]int{}}
	var err error
	if g.viaNft, err = New(g.nft, opts); err != nil {
		t.Fatal(err)
	}
	if g.viaNl, err = goldenNetlinkSyncer(fam, g.nl, opts); err != nil {
		t.Fatal(err)
	}
	return g
}

// goldenNetlinkSyncer opens a netlink Syncer whose backend talks to nl, and whose full syncs
// read the table as a kernel that applied exactly its accepted batches would hold it.
func goldenNetlinkSyncer(fam family, nl *goldenNetlink, opts Options) (*Syncer, error) {
	b, err := newNetlinkBackend(fam.nft, nl.dial)
	if err != nil {
		return nil, err
	}
	b.model.full = true
	b.list = func(context.Context) (*tableImage, error) { return modelImage(b) }
	return NewWithBackend(b, opts)
}

// modelImage spells the backend's model as readNetlinkTable reads a kernel's table.
func modelImage(b *netlinkBackend) (*tableImage, error) {
	img := newTableImage()
	img.exists = b.model.exists
	sp := netlinkSpeller{fam: b.fam, table: b.table}
	for name, c := range b.model.chains {
		ci := &chainImage{base: c.def.Base != nil}
		var err error
		if ci.def, err = sp.chain(c.def); err != nil {
			return nil, err
		}
		for _, r := range c.rules {
			line, err := sp.rule(r)
			if err != nil {
				return nil, err
			}
			ci.rules = append(ci.rules, line)
		}
		img.chains[name] = ci
	}
	for name, s := range b.model.sets {
		ss, err := sp.set(s.def)
		if err != nil {
			return nil, err
		}
		si := &setImage{def: ss.def(), isMap: s.def.IsMap(), dynamic: s.dynamic, elems: map[string]string{}}
		for _, e := range s.values {
			if s.dynamic {
				break
			}
			key, rest, err := ss.element(e)
			if err != nil {
				return nil, err
			}
			si.elems[key] = rest
		}
		img.sets[name] = si
	}
	return img, nil
}

func (g *goldenRun) advance(d time.Duration) {
	g.clock.Advance(d)
	fmt.Fprintf(&g.out, "=== clock +%v\n\n", d)
}

func (g *goldenRun) failNext() { g.nft.failNext, g.nl.failNext = true, true }

func (g *goldenRun) sync(name string, services []Service, full bool) {
	g.step(name, func(s *Syncer) (Stats, error) { return s.Sync(context.Background(), services, full) })
}

func (g *goldenRun) changes(name string, changed []Service, removed []string) {
	g.step(name+" (changes)", func(s *Syncer) (Stats, error) {
		return s.SyncChanges(context.Background(), changed, removed)
	})
}

func (g *goldenRun) step(name string, sync func(*Syncer) (Stats, error)) {
	g.t.Helper()
	g.nft.text, g.nl.log = "", strings.Builder{}
	// The netlink Syncer first: it reads clients from the fake, which the other one writes.
	stNl, errNl := sync(g.viaNl)
	st, err := sync(g.viaNft)
	g.nft.failNext, g.nl.failNext = false, false
	st.Duration, stNl.Duration = 0, 0
	if !reflect.DeepEqual(st, stNl) || (err == nil) != (errNl == nil) {
		g.t.Fatalf("%s: the backends disagree: %+v, %v and %+v, %v", name, st, err, stNl, errNl)
	}
	g.lastErr = err
	fmt.Fprintf(&g.out, "=== %s\n", name)
	cleanup := "-"
	if !st.CleanupAt.IsZero() {
		cleanup = "+" + st.CleanupAt.Sub(g.start).String()
	}
	fmt.Fprintf(&g.out, "stats: full=%v services=%d changed=%d removed=%d operations=%d cleanup=%s\n",
		st.Full, st.Services, st.Changed, st.Removed, st.Operations, cleanup)
	for _, r := range st.Rejected {
		fmt.Fprintf(&g.out, "rejected: %s: %s\n", r.Service, r.Reason)
	}
	if err != nil {
		fmt.Fprintf(&g.out, "error: %v\n", err)
	}
	fmt.Fprintf(&g.out, "--- nft\n%s--- netlink\n%s\n", g.nft.text, g.nl.log.String())
}

// client records client with endpoint ("addr . port") in m, as a packet would.
func (g *goldenRun) client(m affinityMap, client, endpoint string) {
	recordClient(g.t, g.fake, m, client, endpoint)
	fmt.Fprintf(&g.out, "=== client %s recorded with %s\n\n", client, endpoint)
}

// halfClient records client in m's port map only, as when its address entry timed out first.
func (g *goldenRun) halfClient(m affinityMap, client, port string) {
	tx := g.fake.NewTransaction()
	tx.Add(&knftables.Element{Map: m.port, Key: []string{client}, Value: []string{port}})
	if err := g.fake.Run(context.Background(), tx); err != nil {
		g.t.Fatal(err)
	}
	fmt.Fprintf(&g.out, "=== client %s recorded with port %s only\n\n", client, port)
}

// goldenNFT records the text of each transaction run, and refuses one when told to.
type goldenNFT struct {
	*knftables.Fake
	failNext bool
	text     string
}

func (n *goldenNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	n.text += tx.String()
	if n.failNext {
		n.failNext = false
		n.text += "(refused)\n"
		return errKernelRefused
	}
	return n.Fake.Run(ctx, tx)
}

// goldenNetlink stands in for the kernel's netfilter socket: it logs every batch in a stable
// form (set ids, which the library allocates process-wide, numbered by first appearance),
// answers reads of affinity maps from the fake, and refuses one batch when told to.
type goldenNetlink struct {
	fake     *knftables.Fake
	failNext bool
	log      strings.Builder
	ids      map[uint32]int
}

var goldenAck = netlink.Message{Header: netlink.Header{Type: netlink.Error}, Data: make([]byte, 20)}

func (n *goldenNetlink) dial(req []netlink.Message) ([]netlink.Message, error) {
	if len(req) == 0 {
		return []netlink.Message{goldenAck}, nil
	}
	if len(req) == 1 && req[0].Header.Type == nftMsg(unix.NFT_MSG_GETSETELEM) {
		return n.readSet(req[0])
	}
	for _, m := range req {
		if t := uint16(m.Header.Type); t == unix.NFNL_MSG_BATCH_BEGIN || t == unix.NFNL_MSG_BATCH_END {
			continue
		}
		n.message(m)
	}
	if n.failNext {
		n.failNext = false
		n.log.WriteString("(refused)\n")
		return nil, errors.New("simulated: batch refused")
	}
	return []netlink.Message{goldenAck}, nil
}

func nftMsg(t int) netlink.HeaderType { return netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | t) }

var goldenMsgNames = map[int]string{
	unix.NFT_MSG_NEWTABLE: "newtable", unix.NFT_MSG_DELTABLE: "deltable", unix.NFT_MSG_NEWCHAIN: "newchain",
	unix.NFT_MSG_DELCHAIN: "delchain", unix.NFT_MSG_NEWRULE: "newrule", unix.NFT_MSG_DELRULE: "delrule",
	unix.NFT_MSG_NEWSET: "newset", unix.NFT_MSG_DELSET: "delset", unix.NFT_MSG_NEWSETELEM: "newsetelem",
	unix.NFT_MSG_DELSETELEM: "delsetelem",
}

func (n *goldenNetlink) message(m netlink.Message) {
	t := int(m.Header.Type) & 0xff
	name, ok := goldenMsgNames[t]
	if !ok {
		name = "msg" + strconv.Itoa(t)
	}
	fmt.Fprintf(&n.log, "%s flags=%#x family=%d\n", name, uint16(m.Header.Flags), m.Data[0])
	n.attrs(m.Data[4:], goldenAttrCtx{msg: t}, "  ")
}

type goldenAttrCtx struct {
	msg  int
	path []uint16
	expr string
}

// setID reports whether attribute typ at ctx holds a set id.
func (c goldenAttrCtx) setID(typ uint16) bool {
	switch {
	case c.msg == unix.NFT_MSG_NEWSET:
		return len(c.path) == 0 && typ == unix.NFTA_SET_ID
	case c.msg == unix.NFT_MSG_NEWSETELEM || c.msg == unix.NFT_MSG_DELSETELEM:
		return len(c.path) == 0 && typ == unix.NFTA_SET_ELEM_LIST_SET_ID
	case c.msg == unix.NFT_MSG_NEWRULE && len(c.path) == 3 && c.path[0] == unix.NFTA_RULE_EXPRESSIONS:
		return (c.expr == "lookup" && typ == unix.NFTA_LOOKUP_SET_ID) || (c.expr == "dynset" && typ == unix.NFTA_DYNSET_SET_ID)
	}
	return false
}

func (n *goldenNetlink) attrs(b []byte, ctx goldenAttrCtx, indent string) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		fmt.Fprintf(&n.log, "%sundecodable %x\n", indent, b)
		return
	}
	if len(ctx.path) == 2 && ctx.path[0] == unix.NFTA_RULE_EXPRESSIONS { // an expression: name it first
		if pre, err := netlink.NewAttributeDecoder(b); err == nil {
			for pre.Next() {
				if pre.Type() == unix.NFTA_EXPR_NAME {
					ctx.expr = strings.TrimRight(string(pre.Bytes()), "\x00")
				}
			}
		}
	}
	for ad.Next() {
		typ, data := ad.Type(), ad.Bytes()
		switch {
		case ad.TypeFlags()&unix.NLA_F_NESTED != 0:
			fmt.Fprintf(&n.log, "%s%d {\n", indent, typ)
			inner := ctx
			inner.path = append(append([]uint16(nil), ctx.path...), typ)
			n.attrs(data, inner, indent+"  ")
			fmt.Fprintf(&n.log, "%s}\n", indent)
		case ctx.setID(typ) && len(data) == 4:
			id := binary.BigEndian.Uint32(data)
			if id != 0 && n.ids[id] == 0 {
				n.ids[id] = len(n.ids) + 1
			}
			fmt.Fprintf(&n.log, "%s%d set#%d\n", indent, typ, n.ids[id])
		case printable(data):
			fmt.Fprintf(&n.log, "%s%d %q\n", indent, typ, strings.TrimSuffix(string(data), "\x00"))
		default:
			fmt.Fprintf(&n.log, "%s%d %s\n", indent, typ, hex.EncodeToString(data))
		}
	}
}

// printable is a NUL-terminated name or comment.
func printable(b []byte) bool {
	if len(b) < 2 || b[len(b)-1] != 0 {
		return false
	}
	for _, c := range b[:len(b)-1] {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// readSet answers a listing of an affinity map with the fake's elements of that map.
func (n *goldenNetlink) readSet(req netlink.Message) ([]netlink.Message, error) {
	ad, err := netlink.NewAttributeDecoder(req.Data[4:])
	if err != nil {
		return nil, err
	}
	var name string
	for ad.Next() {
		if ad.Type() == unix.NFTA_SET_NAME {
			name = strings.TrimSuffix(string(ad.Bytes()), "\x00")
		}
	}
	fmt.Fprintf(&n.log, "read %s\n", name)
	var elems []*knftables.Element
	if m := n.fake.Table.Maps[name]; m != nil {
		elems = m.Elements
	}
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, TableName)
	ae.String(unix.NFTA_SET_ELEM_LIST_SET, name)
	ae.Nested(unix.NLA_F_NESTED|unix.NFTA_SET_ELEM_LIST_ELEMENTS, func(ae *netlink.AttributeEncoder) error {
		for _, e := range elems {
			ae.Nested(unix.NLA_F_NESTED|unix.NFTA_LIST_ELEM, func(ae *netlink.AttributeEncoder) error {
				ae.Nested(unix.NLA_F_NESTED|unix.NFTA_SET_ELEM_KEY, func(ae *netlink.AttributeEncoder) error {
					ae.Bytes(unix.NFTA_DATA_VALUE, goldenField(e.Key[0]))
					return nil
				})
				ae.Nested(unix.NLA_F_NESTED|unix.NFTA_SET_ELEM_DATA, func(ae *netlink.AttributeEncoder) error {
					ae.Bytes(unix.NFTA_DATA_VALUE, goldenField(e.Value[0]))
					return nil
				})
				return nil
			})
		}
		return nil
	})
	data, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return []netlink.Message{{Header: netlink.Header{Type: nftMsg(unix.NFT_MSG_NEWSETELEM)},
		Data: append([]byte{req.Data[0], 0, 0, 0}, data...)}}, nil
}

// goldenField encodes an address or a port as the kernel stores it in an affinity map.
func goldenField(s string) []byte {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.AsSlice()
	}
	p, _ := strconv.ParseUint(s, 10, 16)
	return binary.BigEndian.AppendUint16(nil, uint16(p))
}
