package dataplane

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The canonical spelling of chains and rules: what the agent wrote and what the kernel lists
// back are both reduced to these lines, so a drift check compares like with like.

// verdictFromData decodes a verdict map's element data, which the nftables library returns
// as the kernel's attributes (a code, then for jump and goto a chain) instead of a Verdict.
func verdictFromData(data []byte) *expr.Verdict {
	v := &expr.Verdict{}
	ad, err := netlink.NewAttributeDecoder(data)
	if err != nil {
		return v
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			v.Kind = expr.VerdictKind(int32(ad.Uint32()))
		case unix.NFTA_VERDICT_CHAIN:
			v.Chain = ad.String()
		}
	}
	return v
}

func hookLine(c *nftables.Chain) string {
	if c.Hooknum == nil {
		return "regular"
	}
	prio := int32(0)
	if c.Priority != nil {
		prio = int32(*c.Priority)
	}
	return fmt.Sprintf("type %s hook %d priority %d", c.Type, uint32(*c.Hooknum), prio)
}

func exprLine(fam byte, exprs []expr.Any) (string, error) {
	var sb strings.Builder
	for _, e := range exprs {
		data, err := expr.Marshal(fam, normalizeExpr(e))
		if err != nil {
			return "", fmt.Errorf("encoding %T: %w", e, err)
		}
		sb.WriteString(hex.EncodeToString(data))
		sb.WriteByte(' ')
	}
	return sb.String(), nil
}

// normalizeExpr spells an expression as the kernel lists it back. The kernel keeps registers
// as 32-bit slots and lists a 32-bit register that starts a 128-bit one under the 128-bit
// number (NFT_REG32_04 as NFT_REG_2); a NAT statement given only a minimum address or port
// lists that value as its maximum too, with the port flagged as specified.
func normalizeExpr(e expr.Any) expr.Any {
	switch x := e.(type) {
	case *expr.NAT:
		n := *x
		if n.RegAddrMax == 0 {
			n.RegAddrMax = n.RegAddrMin
		}
		if n.RegProtoMax == 0 {
			n.RegProtoMax = n.RegProtoMin
		}
		n.Specified = n.Specified || n.RegProtoMin != 0
		n.RegAddrMin, n.RegAddrMax = listedRegister(n.RegAddrMin), listedRegister(n.RegAddrMax)
		n.RegProtoMin, n.RegProtoMax = listedRegister(n.RegProtoMin), listedRegister(n.RegProtoMax)
		return &n
	case *expr.Meta:
		m := *x
		m.Register = listedRegister(m.Register)
		return &m
	case *expr.Ct:
		c := *x
		c.Register = listedRegister(c.Register)
		return &c
	case *expr.Payload:
		p := *x
		p.DestRegister, p.SourceRegister = listedRegister(p.DestRegister), listedRegister(p.SourceRegister)
		return &p
	case *expr.Immediate:
		i := *x
		i.Register = listedRegister(i.Register)
		return &i
	case *expr.Cmp:
		c := *x
		c.Register = listedRegister(c.Register)
		return &c
	case *expr.Lookup:
		l := *x
		l.SourceRegister, l.DestRegister = listedRegister(l.SourceRegister), listedRegister(l.DestRegister)
		return &l
	case *expr.Bitwise:
		b := *x
		b.SourceRegister, b.DestRegister = listedRegister(b.SourceRegister), listedRegister(b.DestRegister)
		return &b
	case *expr.Numgen:
		n := *x
		n.Register = listedRegister(n.Register)
		return &n
	case *expr.Dynset:
		d := *x
		d.SrcRegKey, d.SrcRegData = listedRegister(d.SrcRegKey), listedRegister(d.SrcRegData)
		return &d
	}
	return e
}

// listedRegister is the number the kernel lists for register r (see nft_parse_register and
// nft_dump_register in net/netfilter/nf_tables_api.c).
func listedRegister(r uint32) uint32 {
	const per128 = 4 // 32-bit slots in a 128-bit register
	var slot uint32
	switch {
	case r >= unix.NFT_REG_1 && r <= unix.NFT_REG_4:
		slot = r * per128
	case r >= unix.NFT_REG32_00:
		slot = r + per128 - unix.NFT_REG32_00
	default:
		return r // the verdict register
	}
	if slot%per128 == 0 {
		return slot / per128
	}
	return slot - per128 + unix.NFT_REG32_00
}
