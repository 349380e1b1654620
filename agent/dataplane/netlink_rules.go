package dataplane

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// compileRule turns one rule, as the renderer spells it for nft, into netlink expressions,
// register by register as nft itself would, so `nft list` shows the same rule. It knows the
// few shapes the renderer writes and refuses anything else: a rule it cannot compile fails the
// transaction instead of programming something else.
func compileRule(rule string, fam family, setID func(string) uint32) ([]expr.Any, error) {
	c := ruleCompiler{toks: strings.Fields(rule), fam: fam, setID: setID}
	for c.pos < len(c.toks) {
		if err := c.statement(); err != nil {
			return nil, fmt.Errorf("rule %q: %w", rule, err)
		}
	}
	return c.out, nil
}

type ruleCompiler struct {
	toks  []string
	pos   int
	fam   family
	setID func(string) uint32
	out   []expr.Any
}

func (c *ruleCompiler) peek(words ...string) bool {
	if c.pos+len(words) > len(c.toks) {
		return false
	}
	for i, w := range words {
		if c.toks[c.pos+i] != w {
			return false
		}
	}
	return true
}

func (c *ruleCompiler) take(words ...string) bool {
	if c.peek(words...) {
		c.pos += len(words)
		return true
	}
	return false
}

func (c *ruleCompiler) next() (string, error) {
	if c.pos >= len(c.toks) {
		return "", fmt.Errorf("unexpected end")
	}
	c.pos++
	return c.toks[c.pos-1], nil
}

func (c *ruleCompiler) emit(e ...expr.Any) { c.out = append(c.out, e...) }

func native32(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

// ctStatusDNAT is IPS_DST_NAT, the conntrack status bit of a destination-NATed connection.
const ctStatusDNAT = 1 << 5

// register returns the register that holds the byte at offset of a value loaded at reg 1:
// reg 1 itself for the start, else the 4-byte register at that position.
func register(offset uint32) uint32 {
	if offset == 0 {
		return unix.NFT_REG_1
	}
	return unix.NFT_REG32_00 + offset/4
}

func (c *ruleCompiler) statement() error {
	switch {
	case c.take("jump"), c.take("goto"):
		kind := expr.VerdictJump
		if c.toks[c.pos-1] == "goto" {
			kind = expr.VerdictGoto
		}
		chain, err := c.next()
		c.emit(&expr.Verdict{Kind: kind, Chain: chain})
		return err
	case c.take("drop"):
		c.emit(&expr.Verdict{Kind: expr.VerdictDrop})
	case c.take("ct", "status", "dnat"):
		c.ctBit(expr.CtKeySTATUS, ctStatusDNAT)
	case c.take("ct", "state", "new"):
		c.ctBit(expr.CtKeySTATE, expr.CtStateBitNEW)
	case c.take("fib", "daddr", "type", "local"):
		c.emit(&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(unix.RTN_LOCAL)})
	case c.take("meta", "mark", "set", "meta", "mark"):
		op, err := c.next()
		if err != nil {
			return err
		}
		v, err := c.number()
		if err != nil {
			return err
		}
		mask, xor := ^v, v // or
		if op == "xor" {
			mask = ^uint32(0)
		} else if op != "or" {
			return fmt.Errorf("mark operation %q", op)
		}
		c.emit(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(mask), Xor: native32(xor)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	case c.take("meta", "mark", "and"):
		v, err := c.number()
		if err != nil {
			return err
		}
		if !c.take("!=", "0") {
			return fmt.Errorf("want != 0 after the mark mask")
		}
		c.emit(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(v), Xor: native32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)})
	case c.take("masquerade", "fully-random"):
		c.emit(&expr.Masq{FullyRandom: true})
	case c.take("reject", "with", "tcp", "reset"):
		c.emit(&expr.Reject{Type: unix.NFT_REJECT_TCP_RST})
	case c.take("reject"):
		code := uint8(3) // ICMP port unreachable
		if c.fam.selector == "ip6" {
			code = 4 // ICMPv6 port unreachable
		}
		c.emit(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code})
	case c.take("numgen", "random", "mod"):
		return c.numgenVmap()
	case c.take("dnat", c.fam.selector):
		return c.dnat()
	case c.take("update"):
		return c.update()
	default:
		return c.match()
	}
	return nil
}

// ctBit matches a connection whose conntrack field key has bit set.
func (c *ruleCompiler) ctBit(key expr.CtKey, bit uint32) {
	c.emit(&expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(bit), Xor: native32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)})
}

func (c *ruleCompiler) number() (uint32, error) {
	t, err := c.next()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(t, 0, 32)
	return uint32(v), err
}

// selector is a packet field the renderer matches on.
type selector struct {
	load func(reg uint32) expr.Any
	size uint32
}

func (c *ruleCompiler) selector() (selector, bool) {
	payload := func(base expr.PayloadBase, offset, size uint32) selector {
		return selector{func(reg uint32) expr.Any {
			return &expr.Payload{DestRegister: reg, Base: base, Offset: offset, Len: size}
		}, size}
	}
	ip := c.fam.selector
	v4 := ip == "ip"
	switch {
	case v4 && c.take(ip, "saddr"):
		return payload(expr.PayloadBaseNetworkHeader, 12, 4), true
	case v4 && c.take(ip, "daddr"):
		return payload(expr.PayloadBaseNetworkHeader, 16, 4), true
	case !v4 && c.take(ip, "saddr"):
		return payload(expr.PayloadBaseNetworkHeader, 8, 16), true
	case !v4 && c.take(ip, "daddr"):
		return payload(expr.PayloadBaseNetworkHeader, 24, 16), true
	case c.take("th", "dport"), c.take("tcp", "dport"), c.take("udp", "dport"), c.take("sctp", "dport"):
		// The destination port sits at the same offset in all three; nft's protocol match
		// comes from the rule's own "meta l4proto".
		return payload(expr.PayloadBaseTransportHeader, 2, 2), true
	case c.take("meta", "l4proto"):
		return selector{func(reg uint32) expr.Any { return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg} }, 1}, true
	}
	return selector{}, false
}

// match compiles "a . b . c" followed by a set lookup, a verdict-map lookup, or a comparison
// with a literal.
func (c *ruleCompiler) match() error {
	var fields []selector
	for {
		s, ok := c.selector()
		if !ok {
			t, _ := c.next()
			return fmt.Errorf("unknown statement at %q", t)
		}
		fields = append(fields, s)
		if !c.take(".") {
			break
		}
	}
	c.loadConcat(fields)
	invert := c.take("!=")
	t, err := c.next()
	if err != nil {
		return err
	}
	switch {
	case t == "vmap" && !invert:
		name, err := c.setRef()
		c.emit(&expr.Lookup{SourceRegister: 1, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: name, SetID: c.setID(name)})
		return err
	case strings.HasPrefix(t, "@"):
		name := t[1:]
		c.emit(&expr.Lookup{SourceRegister: 1, SetName: name, SetID: c.setID(name), Invert: invert})
		return nil
	case len(fields) == 1:
		return c.compare(t, fields[0].size, invert)
	}
	return fmt.Errorf("cannot compare a concatenation with %q", t)
}

// loadConcat loads fields one after the other from register 1 on, each padded to 4 bytes as a
// concatenation is, and returns the offset after the last.
func (c *ruleCompiler) loadConcat(fields []selector) uint32 {
	var offset uint32
	for _, f := range fields {
		c.emit(f.load(register(offset)))
		offset += (f.size + 3) / 4 * 4
	}
	return offset
}

func (c *ruleCompiler) setRef() (string, error) {
	t, err := c.next()
	if err != nil || !strings.HasPrefix(t, "@") {
		return "", fmt.Errorf("want a set reference, got %q", t)
	}
	return t[1:], nil
}

// compare matches the loaded field against a protocol name, an address or a prefix.
func (c *ruleCompiler) compare(lit string, size uint32, invert bool) error {
	op := expr.CmpOpEq
	if invert {
		op = expr.CmpOpNeq
	}
	if proto, ok := protocolNumber(lit); ok && size == 1 {
		c.emit(&expr.Cmp{Op: op, Register: 1, Data: []byte{proto}})
		return nil
	}
	if p, err := netip.ParsePrefix(lit); err == nil && uint32(p.Addr().BitLen()/8) == size {
		m := make([]byte, size)
		for i := 0; i < p.Bits(); i++ {
			m[i/8] |= 0x80 >> (i % 8)
		}
		c.emit(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: size, Mask: m, Xor: make([]byte, size)},
			&expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()})
		return nil
	}
	if a, err := netip.ParseAddr(lit); err == nil && uint32(a.BitLen()/8) == size {
		c.emit(&expr.Cmp{Op: op, Register: 1, Data: a.AsSlice()})
		return nil
	}
	return fmt.Errorf("cannot compare with %q", lit)
}

func protocolNumber(name string) (byte, bool) {
	switch Protocol(name) {
	case TCP:
		return unix.IPPROTO_TCP, true
	case UDP:
		return unix.IPPROTO_UDP, true
	case SCTP:
		return unix.IPPROTO_SCTP, true
	}
	return 0, false
}

// numgenVmap compiles "numgen random mod N vmap @map" (after "numgen random mod").
func (c *ruleCompiler) numgenVmap() error {
	n, err := c.number()
	if err != nil || n == 0 || !c.take("vmap") {
		return fmt.Errorf("want numgen random mod N vmap @map")
	}
	name, err := c.setRef()
	c.emit(&expr.Numgen{Register: 1, Modulus: n, Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: name, SetID: c.setID(name)})
	return err
}

// dnat compiles "dnat ip to A:P" and "dnat ip addr . port to f1 . f2 … . numgen random mod N map
// @map", whose map gives the address and port for the packet's fields and a random index (after
// "dnat ip").
func (c *ruleCompiler) dnat() error {
	nat := &expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1}
	if c.fam.selector == "ip6" {
		nat.Family = unix.NFPROTO_IPV6
	}
	if c.take("addr", ".", "port", "to") {
		var fields []selector
		for {
			f, ok := c.selector()
			if !ok || !c.take(".") {
				return fmt.Errorf("want fields . numgen random mod N map @map")
			}
			fields = append(fields, f)
			if c.take("numgen", "random", "mod") {
				break
			}
		}
		offset := c.loadConcat(fields)
		n, err := c.number()
		if err != nil || n == 0 || !c.take("map") {
			return fmt.Errorf("want numgen random mod N map @map")
		}
		name, err := c.setRef()
		if err != nil {
			return err
		}
		nat.RegProtoMin = register(uint32(len(c.fam.anyAddr())))
		c.emit(&expr.Numgen{Register: register(offset), Modulus: n, Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: name, SetID: c.setID(name)}, nat)
		return nil
	}
	if !c.take("to") {
		return fmt.Errorf("want dnat %s to", c.fam.selector)
	}
	if !c.peek(c.fam.selector, "saddr", "map") {
		return c.dnatLiteral(nat)
	}
	// "ip saddr map @addrs : ip saddr map @ports": the address in register 1, the port in 2,
	// each looked up by the source loaded in the register after.
	for i, reg := range []uint32{unix.NFT_REG_1, unix.NFT_REG_2} {
		if i == 1 && !c.take(":") {
			return fmt.Errorf("want : between the address and port maps")
		}
		key, ok := c.selector()
		if !ok || !c.take("map") {
			return fmt.Errorf("want %s saddr map @map", c.fam.selector)
		}
		name, err := c.setRef()
		if err != nil {
			return err
		}
		c.emit(key.load(reg+1), &expr.Lookup{SourceRegister: reg + 1, DestRegister: reg, IsDestRegSet: true, SetName: name, SetID: c.setID(name)})
	}
	nat.RegProtoMin = unix.NFT_REG_2
	c.emit(nat)
	return nil
}

// dnatLiteral compiles the "A:P" of "dnat ip to A:P".
func (c *ruleCompiler) dnatLiteral(nat *expr.NAT) error {
	t, err := c.next()
	if err != nil {
		return err
	}
	ap, err := netip.ParseAddrPort(t)
	if err != nil || !c.fam.contains(ap.Addr()) {
		return fmt.Errorf("bad dnat target %q", t)
	}
	nat.RegProtoMin = unix.NFT_REG_2
	c.emit(&expr.Immediate{Register: 1, Data: ap.Addr().AsSlice()},
		&expr.Immediate{Register: unix.NFT_REG_2, Data: binaryutil.BigEndian.PutUint16(ap.Port())}, nat)
	return nil
}

// update compiles "update @set { ip saddr }" and "update @map { ip saddr : field }" (after
// "update"): the key in register 1, the data in register 2.
func (c *ruleCompiler) update() error {
	name, err := c.setRef()
	if err != nil {
		return err
	}
	if !c.take("{") {
		return fmt.Errorf("want { key }")
	}
	s, ok := c.selector()
	if !ok {
		return fmt.Errorf("want one field as the key in { }")
	}
	c.emit(s.load(1))
	dyn := &expr.Dynset{SrcRegKey: 1, SetName: name, SetID: c.setID(name), Operation: unix.NFT_DYNSET_OP_UPDATE}
	if c.take(":") {
		data, ok := c.selector()
		if !ok {
			return fmt.Errorf("want one field as the data in { key : data }")
		}
		c.emit(data.load(unix.NFT_REG_2))
		dyn.SrcRegData = unix.NFT_REG_2
	}
	if !c.take("}") {
		return fmt.Errorf("want } after { key }")
	}
	c.emit(dyn)
	return nil
}

// anyAddr is the family's unspecified address, for its length.
func (f family) anyAddr() []byte {
	if f.selector == "ip" {
		return netip.IPv4Unspecified().AsSlice()
	}
	return netip.IPv6Unspecified().AsSlice()
}
