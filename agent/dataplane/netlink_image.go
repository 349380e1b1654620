package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/fleetslice/fleetslice/agent/dataplane/netlinkenc"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Both kernel backends read their table over netlink for a full sync: the nft backend too,
// since nft prints rules its own way; netlinkenc compiles every rule as nft does, so a table
// reads back alike whichever backend wrote it, but for one datatype: nft declares the random
// index of the endpoint maps' keys an integer, netlinkenc a mark (see netlinkenc.Def), so a
// table that one backend wrote is rebuilt by the other (nft then refuses a rule that uses a map
// of the other type). Objects are spelled as the kernel encodes them: a chain by its hook, a
// rule by its expressions, a set by its flags, datatypes, lengths and timeout (not its size,
// which google/nftables does not write), an element by its bytes and comment.

// listTable is the netlink read of the table (readNetlinkTable), or what a test puts there.
type listTable func(ctx context.Context) (*tableImage, error)

func (b *netlinkBackend) read(ctx context.Context) (*tableImage, speller, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sp := netlinkSpeller{fam: b.fam, table: b.table}
	if b.list != nil {
		img, err := b.list(ctx)
		return img, sp, err
	}
	b.gens.noteRead()
	img, err := readNetlinkTable(b.table, b.model.size)
	return img, sp, err
}

// readNetlinkTable lists table's chains, rules, sets and (but for dynamic sets) elements. size
// tells how many elements a set probably holds (what the agent last wrote to it).
func readNetlinkTable(table *nftables.Table, size func(set string) int) (*tableImage, error) {
	conn, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, err
	}
	defer conn.CloseLasting()
	img := newTableImage()
	tables, err := conn.ListTablesOfFamily(table.Family)
	if err != nil || !slices.ContainsFunc(tables, func(t *nftables.Table) bool { return t.Name == TableName }) {
		return img, err
	}
	img.exists = true
	if err := readChains(conn, table, img); err != nil {
		return nil, err
	}
	sets, err := listSets(table.Family)
	if err != nil {
		return nil, err
	}
	dumper, err := newElementDumper(byte(table.Family))
	if err != nil {
		return nil, err
	}
	defer dumper.close()
	for name, ks := range sets {
		s := &setImage{def: ks.spell(), isMap: ks.flags&unix.NFT_SET_MAP != 0, dynamic: ks.dynamic()}
		img.sets[name] = s
		if s.dynamic {
			continue
		}
		spell := newElementSpeller(ks.flags&unix.NFT_SET_INTERVAL != 0, size(name))
		if err := dumper.elements(name, spell.add); err != nil {
			return nil, fmt.Errorf("listing set %s: %w", name, err)
		}
		s.elems = spell.spelled()
	}
	return img, nil
}

func readChains(conn *nftables.Conn, table *nftables.Table, img *tableImage) error {
	chains, err := conn.ListChainsOfTableFamily(table.Family)
	if err != nil {
		return err
	}
	fam := byte(table.Family)
	for _, c := range chains {
		if c.Table.Name != TableName {
			continue
		}
		rules, err := conn.GetRules(table, c)
		if err != nil {
			return fmt.Errorf("listing chain %s: %w", c.Name, err)
		}
		ci := &chainImage{def: hookLine(c), base: c.Hooknum != nil, rules: make([]string, len(rules))}
		for i, r := range rules {
			if ci.rules[i], err = exprLine(fam, r.Exprs); err != nil {
				return fmt.Errorf("chain %s: %w", c.Name, err)
			}
		}
		img.chains[c.Name] = ci
	}
	return nil
}

// elementSpeller spells a set's elements as they are read; an interval set's as the ranges
// they make, once all are read.
type elementSpeller struct {
	elems        map[string]string
	interval     bool
	starts, ends [][]byte
}

// newElementSpeller spells a set of about size elements: its map grows once, not through every
// size on the way (a full sync reads every element of the table).
func newElementSpeller(interval bool, size int) *elementSpeller {
	return &elementSpeller{elems: make(map[string]string, size), interval: interval}
}

func (s *elementSpeller) add(e *dumpedElement) {
	switch {
	case !s.interval:
		s.elems[string(e.key)] = elementRest(e.val, e.verdict, int(e.code), e.chain, e.comment)
	case e.intervalEnd:
		s.ends = append(s.ends, bytes.Clone(e.key))
	default:
		s.starts = append(s.starts, bytes.Clone(e.key))
	}
}

func (s *elementSpeller) spelled() map[string]string {
	if s.interval {
		for _, r := range ranges(s.starts, s.ends) {
			s.elems[r] = ""
		}
	}
	return s.elems
}

func elementRest(val []byte, verdict bool, code int, chain, comment string) string {
	rest := string(val) + "\x00" + comment
	if verdict {
		rest += "\x00" + strconv.Itoa(code) + " " + chain
	}
	return rest
}

// ranges spells an interval set's elements, starts and ends, as "start-end" (end empty for a
// range that reaches the end of the address space): each start goes up to the first end above
// it. nft writes an end at the zero address before the first range, which starts nothing and
// goes.
func ranges(starts, ends [][]byte) []string {
	slices.SortFunc(ends, bytes.Compare)
	out := make([]string, 0, len(starts))
	for _, s := range starts {
		i, _ := slices.BinarySearchFunc(ends, s, bytes.Compare)
		for i < len(ends) && bytes.Equal(ends[i], s) {
			i++
		}
		end := ""
		if i < len(ends) {
			end = string(ends[i])
		}
		out = append(out, string(s)+"-"+end)
	}
	return out
}

// kernelSet is what a set's definition says of it, as listSets reads it.
type kernelSet struct {
	flags             uint32
	keyType, dataType uint32
	keyLen, dataLen   uint32
	timeout           time.Duration
}

// spellSet is the definition as compared: nft sets the concatenation flag only on interval
// sets, so it is left out, and so is a verdict's length.
func spellSet(k kernelSet) string {
	flags := k.flags & (unix.NFT_SET_MAP | unix.NFT_SET_INTERVAL | unix.NFT_SET_TIMEOUT | unix.NFT_SET_EVAL)
	data := strconv.Itoa(int(k.dataLen))
	if k.verdict() {
		data = "verdict"
	}
	return fmt.Sprintf("flags %#x key %#x/%d data %#x/%s timeout %s", flags, k.keyType, k.keyLen, k.dataType, data, k.timeout)
}

func (k kernelSet) verdict() bool { return k.dataType == unix.NFT_DATA_VERDICT }

func (k kernelSet) spell() string { return spellSet(k) }

func (k kernelSet) dynamic() bool { return k.flags&(unix.NFT_SET_EVAL|unix.NFT_SET_TIMEOUT) != 0 }

// listSets reads the definitions of the table's sets with one netlink dump. google/nftables'
// GetSets loses a verdict map's key length, so the attributes are decoded here.
func listSets(family nftables.TableFamily) (map[string]kernelSet, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_SET_TABLE, TableName)
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETSET),
			Flags: netlink.Request | netlink.Dump},
		Data: append([]byte{byte(family), unix.NFNETLINK_V0, 0, 0}, attrs...),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the sets of table %s: %w", TableName, err)
	}
	out := map[string]kernelSet{}
	for _, m := range msgs {
		name, ks, err := decodeSet(m.Data)
		if err != nil {
			return nil, err
		}
		out[name] = ks
	}
	return out, nil
}

func decodeSet(data []byte) (string, kernelSet, error) {
	var ks kernelSet
	var name string
	if len(data) < 4 {
		return "", ks, fmt.Errorf("a set message of %d bytes", len(data))
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return "", ks, err
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_NAME:
			name = ad.String()
		case unix.NFTA_SET_FLAGS:
			ks.flags = ad.Uint32()
		case unix.NFTA_SET_KEY_TYPE:
			ks.keyType = ad.Uint32()
		case unix.NFTA_SET_KEY_LEN:
			ks.keyLen = ad.Uint32()
		case unix.NFTA_SET_DATA_TYPE:
			ks.dataType = ad.Uint32()
		case unix.NFTA_SET_DATA_LEN:
			ks.dataLen = ad.Uint32()
		case unix.NFTA_SET_TIMEOUT:
			ks.timeout = time.Duration(ad.Uint64()) * time.Millisecond
		}
	}
	return name, ks, ad.Err()
}

// netlinkSpeller spells objects as netlinkenc encodes them and readNetlinkTable reads them;
// with nft, a set's datatypes as nft declares them.
type netlinkSpeller struct {
	fam   family
	table *nftables.Table
	nft   bool
}

func (n netlinkSpeller) chain(c *ruleset.Chain) (string, error) {
	nc, err := netlinkenc.Chain(n.table, c)
	if err != nil {
		return "", err
	}
	return hookLine(nc), nil
}

func (n netlinkSpeller) rule(stmts []ruleset.Stmt) (string, error) {
	exprs, err := netlinkenc.Exprs(n.fam.rs, stmts, func(string) uint32 { return 0 })
	if err != nil {
		return "", err
	}
	return exprLine(byte(n.table.Family), exprs)
}

func (n netlinkSpeller) set(s *ruleset.Set) (setSpeller, error) {
	d, err := netlinkenc.Def(n.fam.rs, s)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", s.Name, err)
	}
	ks := kernelSet{timeout: s.Timeout}
	ks.keyLen, ks.dataLen = d.Lengths()
	if ks.keyType, ks.dataType, err = d.Magic(n.nft); err != nil {
		return nil, fmt.Errorf("set %s: %w", s.Name, err)
	}
	if d.Verdict || d.Data != nil {
		ks.flags |= unix.NFT_SET_MAP
	}
	if d.Interval {
		ks.flags |= unix.NFT_SET_INTERVAL
	}
	if s.Timeout != 0 {
		ks.flags |= unix.NFT_SET_TIMEOUT
	}
	for _, f := range s.Flags {
		switch f {
		case ruleset.Dynamic:
			ks.flags |= unix.NFT_SET_EVAL
		case ruleset.HasTimeout:
			ks.flags |= unix.NFT_SET_TIMEOUT
		}
	}
	return netlinkSetSpeller{d: d, spelled: spellSet(ks), scratch: new([]nftables.SetElement)}, nil
}

type netlinkSetSpeller struct {
	d       *netlinkenc.SetDef
	spelled string
	// scratch holds the last element encoded: a full sync spells every element of the table,
	// and what it keeps of one is its spelling.
	scratch *[]nftables.SetElement
}

func (n netlinkSetSpeller) def() string { return n.spelled }

func (n netlinkSetSpeller) element(e *ruleset.Element) (string, string, error) {
	enc, err := n.d.AppendEncoded((*n.scratch)[:0], e, false)
	if err != nil {
		return "", "", err
	}
	*n.scratch = enc
	if n.d.Interval {
		var ends [][]byte
		if len(enc) > 1 {
			ends = append(ends, enc[1].Key)
		}
		return ranges([][]byte{enc[0].Key}, ends)[0], "", nil
	}
	v := enc[0].VerdictData
	if v == nil {
		return string(enc[0].Key), elementRest(enc[0].Val, false, 0, "", e.Comment), nil
	}
	return string(enc[0].Key), elementRest(nil, true, int(v.Kind), v.Chain, e.Comment), nil
}

func (n netlinkSetSpeller) values(key string) ([]ruleset.Value, error) {
	return n.d.DecodeKey([]byte(key))
}
