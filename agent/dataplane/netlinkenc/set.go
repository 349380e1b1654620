package netlinkenc

import (
	"encoding/binary"
	"fmt"
	"math/big"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// SetDef is the type of a set or map, as needed to encode its elements.
type SetDef struct {
	Key      []nftables.SetDatatype
	Data     []nftables.SetDatatype // nil for a set and a verdict map
	Verdict  bool
	Interval bool
}

var datatypes = map[ruleset.Type]nftables.SetDatatype{
	ruleset.IPv4Addr: nftables.TypeIPAddr, ruleset.IPv6Addr: nftables.TypeIP6Addr,
	ruleset.InetProto: nftables.TypeInetProto, ruleset.InetService: nftables.TypeInetService,
}

// Def is the type of s.
func Def(fam ruleset.Family, s *ruleset.Set) (*SetDef, error) {
	d := &SetDef{}
	if len(s.KeyOf) > 0 {
		for _, f := range s.KeyOf {
			t, err := fieldType(fam, f, true)
			if err != nil {
				return nil, err
			}
			if t == nftables.TypeInteger && len(s.KeyOf) > 1 {
				// nft writes a typeof declaration into the set's userdata, which google/nftables
				// cannot; without it nft cannot size an integer inside a concatenation and fails
				// to list the map. A mark is the same 32-bit host-order number, with a size nft
				// knows.
				t = nftables.TypeMark
			}
			d.Key = append(d.Key, t)
		}
		for _, f := range s.DataOf {
			t, err := fieldType(fam, f, false)
			if err != nil {
				return nil, err
			}
			d.Data = append(d.Data, t)
		}
	} else {
		for _, t := range s.Key {
			dt, ok := datatypes[t]
			if !ok {
				return nil, fmt.Errorf("unsupported key type %d", t)
			}
			d.Key = append(d.Key, dt)
		}
		if len(s.Data) == 1 && s.Data[0] == ruleset.VerdictType {
			d.Verdict = true
		} else {
			for _, t := range s.Data {
				dt, ok := datatypes[t]
				if !ok {
					return nil, fmt.Errorf("unsupported data type %d", t)
				}
				d.Data = append(d.Data, dt)
			}
		}
	}
	if len(d.Key) == 0 {
		return nil, fmt.Errorf("no key type")
	}
	for _, f := range s.Flags {
		d.Interval = d.Interval || f == ruleset.Interval
	}
	return d, nil
}

// fieldType is the datatype of a field in a typeof declaration; a numgen value only in a key.
func fieldType(fam ruleset.Family, f ruleset.Field, key bool) (nftables.SetDatatype, error) {
	switch {
	case f.Kind == ruleset.DAddr && fam == ruleset.IPv6:
		return nftables.TypeIP6Addr, nil
	case f.Kind == ruleset.DAddr:
		return nftables.TypeIPAddr, nil
	case f.Kind == ruleset.L4Proto:
		return nftables.TypeInetProto, nil
	case f.Kind == ruleset.THDport || f.Kind == ruleset.Dport:
		return nftables.TypeInetService, nil
	case key && f.Kind == ruleset.Numgen:
		return nftables.TypeInteger, nil
	}
	return nftables.SetDatatype{}, fmt.Errorf("unsupported typeof field %+v", f)
}

func concat(types []nftables.SetDatatype) (nftables.SetDatatype, error) {
	if len(types) == 1 {
		return types[0], nil
	}
	return nftables.ConcatSetType(types...)
}

// Describe fills the type fields of s.
func (d *SetDef) Describe(s *nftables.Set) error {
	var err error
	if s.KeyType, err = concat(d.Key); err != nil {
		return err
	}
	s.Concatenation = len(d.Key) > 1
	s.Interval = d.Interval
	if d.Key[0] == nftables.TypeInteger {
		s.KeyByteOrder = binaryutil.NativeEndian
	}
	switch {
	case d.Verdict:
		s.IsMap, s.DataType = true, nftables.TypeVerdict
	case d.Data != nil:
		s.IsMap = true
		s.DataType, err = concat(d.Data)
	}
	return err
}

// Set describes s as google/nftables declares it, with its flags and timeout.
func Set(fam ruleset.Family, table *nftables.Table, s *ruleset.Set) (*nftables.Set, *SetDef, error) {
	d, err := Def(fam, s)
	if err != nil {
		return nil, nil, fmt.Errorf("set %s: %w", s.Name, err)
	}
	out := &nftables.Set{Table: table, Name: s.Name}
	for _, f := range s.Flags {
		switch f {
		case ruleset.Interval:
		case ruleset.Dynamic:
			out.Dynamic = true
		case ruleset.HasTimeout:
			out.HasTimeout = true
		default:
			return nil, nil, fmt.Errorf("set %s: unsupported flag %d", s.Name, f)
		}
	}
	if s.Timeout != 0 {
		out.HasTimeout, out.Timeout = true, s.Timeout
	}
	if err := d.Describe(out); err != nil {
		return nil, nil, fmt.Errorf("set %s: %w", s.Name, err)
	}
	return out, d, nil
}

// Encode turns one element into what the kernel stores; an interval element (a prefix) becomes
// its start and the end that follows it. A deleted element needs only its key (keyOnly).
func (d *SetDef) Encode(e *ruleset.Element, keyOnly bool) ([]nftables.SetElement, error) {
	return d.AppendEncoded(nil, e, keyOnly)
}

// AppendEncoded is Encode appending to dst: a batch gathers a message's elements in one slice
// it reuses, rather than a slice per element (a full sync encodes hundreds of thousands).
func (d *SetDef) AppendEncoded(dst []nftables.SetElement, e *ruleset.Element, keyOnly bool) ([]nftables.SetElement, error) {
	if d.Interval {
		if len(e.Key) != 1 || len(d.Key) != 1 || e.Key[0].Kind != ruleset.PrefixValue {
			return dst, fmt.Errorf("interval element %+v", e.Key)
		}
		p := e.Key[0].Prefix().Masked()
		dst = append(dst, nftables.SetElement{Key: p.Addr().AsSlice()})
		if end, ok := prefixEnd(p); ok {
			dst = append(dst, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
		return dst, nil
	}
	k, err := encodeFields(d.Key, e.Key)
	if err != nil {
		return dst, err
	}
	el := nftables.SetElement{Key: k}
	switch {
	case keyOnly || (!d.Verdict && d.Data == nil):
	case d.Verdict:
		if e.Verdict == nil {
			return dst, fmt.Errorf("verdict map element %+v without a verdict", e.Key)
		}
		if el.VerdictData, err = verdict(e.Verdict); err != nil {
			return dst, err
		}
	default:
		if el.Val, err = encodeFields(d.Data, e.Value); err != nil {
			return dst, err
		}
	}
	return append(dst, el), nil
}

func verdict(v *ruleset.Verdict) (*expr.Verdict, error) {
	switch v.Kind {
	case ruleset.Goto:
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: v.Chain}, nil
	case ruleset.Jump:
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: v.Chain}, nil
	case ruleset.Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	}
	return nil, fmt.Errorf("unsupported verdict %d", v.Kind)
}

// encodeFields encodes a concatenation, each field padded to 4 bytes; a lone field keeps its
// size.
func encodeFields(types []nftables.SetDatatype, vals []ruleset.Value) ([]byte, error) {
	if len(vals) != len(types) {
		return nil, fmt.Errorf("%d fields for %d types", len(vals), len(types))
	}
	// Concatenated fields are each padded to 4 bytes.
	size := 0
	for _, t := range types {
		size += (int(t.Bytes) + 3) &^ 3
	}
	out := make([]byte, 0, size)
	for i, t := range types {
		var err error
		if out, err = appendField(out, t, vals[i]); err != nil {
			return nil, err
		}
		if len(types) > 1 {
			for len(out)%4 != 0 {
				out = append(out, 0)
			}
		}
	}
	return out, nil
}

func appendField(out []byte, t nftables.SetDatatype, v ruleset.Value) ([]byte, error) {
	switch {
	case (t == nftables.TypeIPAddr || t == nftables.TypeIP6Addr) && v.Kind == ruleset.AddrValue:
		switch {
		case v.Addr.Is4() && t.Bytes == 4:
			a := v.Addr.As4()
			return append(out, a[:]...), nil
		case v.Addr.Is6() && t.Bytes == 16:
			a := v.Addr.As16()
			return append(out, a[:]...), nil
		}
	case t == nftables.TypeInetProto && v.Kind == ruleset.ProtoValue:
		return append(out, byte(v.Num)), nil
	case t == nftables.TypeInetService && v.Kind == ruleset.PortValue:
		return binary.BigEndian.AppendUint16(out, uint16(v.Num)), nil
	case (t == nftables.TypeInteger || t == nftables.TypeMark) && v.Kind == ruleset.IndexValue:
		return binary.NativeEndian.AppendUint32(out, v.Num), nil
	}
	return nil, fmt.Errorf("bad %s %+v", t.Name, v)
}

// Decode reads an address or a port as the kernel stores it in a map.
func Decode(t nftables.SetDatatype, b []byte) (ruleset.Value, error) {
	if uint32(len(b)) < t.Bytes {
		return ruleset.Value{}, fmt.Errorf("%d bytes for a %s", len(b), t.Name)
	}
	switch t {
	case nftables.TypeIPAddr, nftables.TypeIP6Addr:
		a, _ := netip.AddrFromSlice(b[:t.Bytes])
		return ruleset.Addr(a), nil
	case nftables.TypeInetService:
		return ruleset.Port(binaryutil.BigEndian.Uint16(b)), nil
	}
	return ruleset.Value{}, fmt.Errorf("unsupported type %s", t.Name)
}

// prefixEnd is the first address after p, false when p reaches the end of the address space.
func prefixEnd(p netip.Prefix) (netip.Addr, bool) {
	n := new(big.Int).SetBytes(p.Addr().AsSlice())
	bits := p.Addr().BitLen()
	n.Add(n, new(big.Int).Lsh(big.NewInt(1), uint(bits-p.Bits())))
	if n.BitLen() > bits {
		return netip.Addr{}, false
	}
	b := make([]byte, bits/8)
	n.FillBytes(b)
	a, _ := netip.AddrFromSlice(b)
	return a, true
}

// DecodeKey reads back a key as the kernel stores it in a set of type d (the inverse of the
// key Encode writes), to delete an element the agent did not write.
func (d *SetDef) DecodeKey(b []byte) ([]ruleset.Value, error) {
	out := make([]ruleset.Value, 0, len(d.Key))
	rest := b
	for _, t := range d.Key {
		if uint32(len(rest)) < t.Bytes {
			return nil, fmt.Errorf("key %x: %d bytes left for a %s", b, len(rest), t.Name)
		}
		field := rest[:t.Bytes]
		switch t {
		case nftables.TypeIPAddr, nftables.TypeIP6Addr:
			a, _ := netip.AddrFromSlice(field)
			out = append(out, ruleset.Addr(a))
		case nftables.TypeInetProto:
			out = append(out, ruleset.Proto(ruleset.Protocol(field[0])))
		case nftables.TypeInetService:
			out = append(out, ruleset.Port(binaryutil.BigEndian.Uint16(field)))
		case nftables.TypeMark, nftables.TypeInteger:
			out = append(out, ruleset.Index(int(binaryutil.NativeEndian.Uint32(field))))
		default:
			return nil, fmt.Errorf("key %x: unsupported type %s", b, t.Name)
		}
		rest = rest[min(uint32(len(rest)), fieldSize(d.Key, t)):]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("key %x: %d bytes too many", b, len(rest))
	}
	return out, nil
}

// fieldSize is what a field of type t takes in a key of types: a concatenation pads each
// field to 4 bytes.
func fieldSize(types []nftables.SetDatatype, t nftables.SetDatatype) uint32 {
	if len(types) > 1 {
		return (t.Bytes + 3) / 4 * 4
	}
	return t.Bytes
}

// Lengths are the sizes of the key and of the data, in bytes, as the kernel stores them; data
// is 0 for a set and for a verdict map.
func (d *SetDef) Lengths() (key, data uint32) {
	for _, t := range d.Key {
		key += fieldSize(d.Key, t)
	}
	for _, t := range d.Data {
		data += fieldSize(d.Data, t)
	}
	return key, data
}

// Magic is the datatype number of the key and of the data (a concatenation's fields packed as
// the kernel stores them; 0 for a set's data, NFT_DATA_VERDICT for a verdict map's). integer
// names the numgen field of a typeof key as nft does (integer) instead of as a mark (see Def):
// the same bytes, another number.
func (d *SetDef) Magic(integer bool) (key, data uint32, err error) {
	types := d.Key
	if integer {
		types = slices.Clone(d.Key)
		for i, t := range types {
			if t == nftables.TypeMark {
				types[i] = nftables.TypeInteger
			}
		}
	}
	k, err := concat(types)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case d.Verdict:
		return k.GetNFTMagic(), unix.NFT_DATA_VERDICT, nil
	case d.Data != nil:
		v, err := concat(d.Data)
		return k.GetNFTMagic(), v.GetNFTMagic(), err
	}
	return k.GetNFTMagic(), 0, nil
}
