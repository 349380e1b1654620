// Package netlinkenc translates ruleset values into google/nftables objects: rules into
// expressions, register by register as nft itself would compile them (so `nft list` shows the
// same rules), sets and maps into their netlink types, elements into their bytes.
package netlinkenc

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Exprs compiles a rule's statements. setID gives the batch-local id of a set the same batch
// defines (zero for one that exists already).
func Exprs(fam ruleset.Family, stmts []ruleset.Stmt, setID func(string) uint32) ([]expr.Any, error) {
	c := compiler{fam: fam, setID: setID}
	for _, s := range stmts {
		if err := c.stmt(s); err != nil {
			return nil, err
		}
	}
	return c.out, nil
}

type compiler struct {
	fam   ruleset.Family
	setID func(string) uint32
	out   []expr.Any
}

func (c *compiler) emit(e ...expr.Any) { c.out = append(c.out, e...) }

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

func (c *compiler) stmt(s ruleset.Stmt) error {
	switch s := s.(type) {
	case *ruleset.Verdict:
		return c.verdict(s)
	case *ruleset.CtStatusDNAT:
		c.ctBit(expr.CtKeySTATUS, ctStatusDNAT)
	case *ruleset.CtStateNew:
		c.ctBit(expr.CtKeySTATE, expr.CtStateBitNEW)
	case *ruleset.FibDaddrLocal:
		c.emit(&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native32(unix.RTN_LOCAL)})
	case *ruleset.MarkSet:
		mask, xor := ^s.Bits, s.Bits
		if s.Xor {
			mask = ^uint32(0)
		}
		c.emit(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(mask), Xor: native32(xor)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	case *ruleset.MarkTest:
		c.emit(&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(s.Mask), Xor: native32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)})
	case *ruleset.Masquerade:
		c.emit(&expr.Masq{FullyRandom: true})
	case *ruleset.Reject:
		c.reject(s)
	case *ruleset.Lookup:
		c.loadConcat(s.Fields)
		c.emit(&expr.Lookup{SourceRegister: 1, SetName: s.Set, SetID: c.setID(s.Set), Invert: s.Invert})
	case *ruleset.VerdictMap:
		c.loadConcat(s.Fields)
		c.emit(&expr.Lookup{SourceRegister: 1, DestRegister: unix.NFT_REG_VERDICT, IsDestRegSet: true, SetName: s.Map, SetID: c.setID(s.Map)})
	case *ruleset.Compare:
		return c.compare(s)
	case *ruleset.DNATPick:
		c.dnatPick(s)
	case *ruleset.DNATClient:
		c.dnatClient(s)
	case *ruleset.Update:
		c.update(s)
	default:
		return fmt.Errorf("netlinkenc: unsupported statement %T", s)
	}
	return nil
}

func (c *compiler) verdict(v *ruleset.Verdict) error {
	switch v.Kind {
	case ruleset.Jump:
		c.emit(&expr.Verdict{Kind: expr.VerdictJump, Chain: v.Chain})
	case ruleset.Goto:
		c.emit(&expr.Verdict{Kind: expr.VerdictGoto, Chain: v.Chain})
	case ruleset.Drop:
		c.emit(&expr.Verdict{Kind: expr.VerdictDrop})
	default:
		return fmt.Errorf("netlinkenc: unsupported verdict %d", v.Kind)
	}
	return nil
}

func (c *compiler) reject(r *ruleset.Reject) {
	if r.TCPReset {
		c.emit(&expr.Reject{Type: unix.NFT_REJECT_TCP_RST})
		return
	}
	code := uint8(3) // ICMP port unreachable
	if c.fam == ruleset.IPv6 {
		code = 4 // ICMPv6 port unreachable
	}
	c.emit(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code})
}

// ctBit matches a connection whose conntrack field key has bit set.
func (c *compiler) ctBit(key expr.CtKey, bit uint32) {
	c.emit(&expr.Ct{Register: 1, Key: key},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(bit), Xor: native32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)})
}

// load emits the load of f into reg and returns the field's size in bytes.
func (c *compiler) load(f ruleset.Field, reg uint32) (uint32, error) {
	payload := func(base expr.PayloadBase, offset, size uint32) uint32 {
		c.emit(&expr.Payload{DestRegister: reg, Base: base, Offset: offset, Len: size})
		return size
	}
	v4 := c.fam != ruleset.IPv6
	switch {
	case f.Kind == ruleset.SAddr && v4:
		return payload(expr.PayloadBaseNetworkHeader, 12, 4), nil
	case f.Kind == ruleset.DAddr && v4:
		return payload(expr.PayloadBaseNetworkHeader, 16, 4), nil
	case f.Kind == ruleset.SAddr:
		return payload(expr.PayloadBaseNetworkHeader, 8, 16), nil
	case f.Kind == ruleset.DAddr:
		return payload(expr.PayloadBaseNetworkHeader, 24, 16), nil
	case f.Kind == ruleset.THDport, f.Kind == ruleset.Dport:
		// The destination port sits at the same offset in TCP, UDP and SCTP; the protocol
		// match comes from the rule's own l4proto comparison.
		return payload(expr.PayloadBaseTransportHeader, 2, 2), nil
	case f.Kind == ruleset.L4Proto:
		c.emit(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg})
		return 1, nil
	}
	return 0, fmt.Errorf("netlinkenc: field %d cannot be loaded", f.Kind)
}

// loadConcat loads fields one after the other from register 1 on, each padded to 4 bytes as a
// concatenation is, and returns the offset after the last.
func (c *compiler) loadConcat(fields []ruleset.Field) uint32 {
	var offset uint32
	for _, f := range fields {
		size, _ := c.load(f, register(offset))
		offset += (size + 3) / 4 * 4
	}
	return offset
}

// compare matches the loaded field against a protocol, an address or a prefix. A prefix loads
// only the bytes it covers and masks the last one when the prefix ends inside it, as nft compiles
// it: a table written through either backend then reads back the same.
func (c *compiler) compare(s *ruleset.Compare) error {
	op := expr.CmpOpEq
	if s.Invert {
		op = expr.CmpOpNeq
	}
	v := s.Value
	if v.Kind == ruleset.PrefixValue && !v.Prefix().IsSingleIP() {
		return c.comparePrefix(s.Field, op, v.Prefix())
	}
	size, err := c.load(s.Field, 1)
	if err != nil {
		return err
	}
	switch {
	case v.Kind == ruleset.ProtoValue && size == 1:
		c.emit(&expr.Cmp{Op: op, Register: 1, Data: []byte{byte(v.Num)}})
	case (v.Kind == ruleset.AddrValue || v.Kind == ruleset.PrefixValue) && uint32(v.Addr.BitLen()/8) == size:
		c.emit(&expr.Cmp{Op: op, Register: 1, Data: v.Addr.AsSlice()})
	default:
		return fmt.Errorf("netlinkenc: cannot compare a %d-byte field with %+v", size, v)
	}
	return nil
}

func (c *compiler) comparePrefix(f ruleset.Field, op expr.CmpOp, p netip.Prefix) error {
	offsets := map[bool]map[ruleset.FieldKind]uint32{
		true:  {ruleset.SAddr: 12, ruleset.DAddr: 16},
		false: {ruleset.SAddr: 8, ruleset.DAddr: 24},
	}
	offset, ok := offsets[p.Addr().Is4()][f.Kind]
	if !ok || p.Addr().Is4() != (c.fam != ruleset.IPv6) {
		return fmt.Errorf("netlinkenc: cannot compare field %d with the prefix %s", f.Kind, p)
	}
	n := uint32(p.Bits()+7) / 8
	c.emit(&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: n})
	if p.Bits()%8 != 0 {
		m := make([]byte, n)
		for i := 0; i < p.Bits(); i++ {
			m[i/8] |= 0x80 >> (i % 8)
		}
		c.emit(&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: m, Xor: make([]byte, n)})
	}
	c.emit(&expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()[:n]})
	return nil
}

func (c *compiler) nat() *expr.NAT {
	nat := &expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1}
	if c.fam == ruleset.IPv6 {
		nat.Family = unix.NFPROTO_IPV6
	}
	return nat
}

// dnatPick: the map gives the address (register 1 on) and the port (right after the
// address) for the packet's fields and a random index.
func (c *compiler) dnatPick(s *ruleset.DNATPick) {
	nat := c.nat()
	offset := c.loadConcat(s.Fields)
	addrLen := uint32(4)
	if c.fam == ruleset.IPv6 {
		addrLen = 16
	}
	nat.RegProtoMin = register(addrLen)
	c.emit(&expr.Numgen{Register: register(offset), Modulus: s.Mod, Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: s.Map, SetID: c.setID(s.Map)}, nat)
}

// dnatClient: the address in register 1, the port in 2, each looked up by the source address
// loaded into the register the lookup then overwrites, as nft allocates them.
func (c *compiler) dnatClient(s *ruleset.DNATClient) {
	nat := c.nat()
	for i, reg := range []uint32{unix.NFT_REG_1, unix.NFT_REG_2} {
		name := s.AddrMap
		if i == 1 {
			name = s.PortMap
		}
		_, _ = c.load(ruleset.Field{Kind: ruleset.SAddr}, reg)
		c.emit(&expr.Lookup{SourceRegister: reg, DestRegister: reg, IsDestRegSet: true, SetName: name, SetID: c.setID(name)})
	}
	nat.RegProtoMin = unix.NFT_REG_2
	c.emit(nat)
}

// update: the key in register 1, the data in register 2.
func (c *compiler) update(s *ruleset.Update) {
	_, _ = c.load(s.Key, 1)
	_, _ = c.load(s.Data, unix.NFT_REG_2)
	c.emit(&expr.Dynset{SrcRegKey: 1, SrcRegData: unix.NFT_REG_2, SetName: s.Set, SetID: c.setID(s.Set), Operation: unix.NFT_DYNSET_OP_UPDATE})
}
