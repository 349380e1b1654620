package dataplane

import (
	"fmt"
	"math/big"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// setDef is the type of a set or map, as needed to encode its elements.
type setDef struct {
	key      []nftables.SetDatatype
	data     []nftables.SetDatatype // nil for a set
	verdict  bool
	interval bool
}

var datatypesByName = map[string]nftables.SetDatatype{
	"ipv4_addr": nftables.TypeIPAddr, "ipv6_addr": nftables.TypeIP6Addr,
	"inet_proto": nftables.TypeInetProto, "inet_service": nftables.TypeInetService,
}

// parseSetSpec reads the type of a set or map as the renderer writes it: "t1 . t2",
// "t1 . t2 : verdict" or "t1 : t2" with type names, or, with typeOf, the expressions of the endpoint maps
// ("ip daddr . meta l4proto . th dport . numgen random mod 1 : ip daddr . th dport" or
// "numgen random mod 1 : verdict").
func parseSetSpec(spec string, typeOf bool) (*setDef, error) {
	keyPart, dataPart, isMap := strings.Cut(spec, " : ")
	d := &setDef{}
	fields := strings.Split(keyPart, " . ")
	for _, field := range fields {
		t, ok := datatypesByName[field]
		if typeOf {
			t, ok = typeOfField(field, true)
		}
		if t == nftables.TypeInteger && len(fields) > 1 {
			// nft writes a typeof declaration into the set's userdata, which google/nftables
			// cannot; without it nft cannot size an integer inside a concatenation and fails to
			// list the map. A mark is the same 32-bit host-order number, with a size nft knows.
			t = nftables.TypeMark
		}
		if !ok {
			return nil, fmt.Errorf("unsupported key %q in %q", field, spec)
		}
		d.key = append(d.key, t)
	}
	if typeOf && !isMap {
		return nil, fmt.Errorf("unsupported typeof %q", spec)
	}
	switch {
	case !isMap:
	case dataPart == "verdict":
		d.verdict = true
	case typeOf:
		for _, field := range strings.Split(dataPart, " . ") {
			t, ok := typeOfField(field, false)
			if !ok {
				return nil, fmt.Errorf("unsupported typeof field %q", field)
			}
			d.data = append(d.data, t)
		}
	default:
		t, ok := datatypesByName[dataPart]
		if !ok {
			return nil, fmt.Errorf("unsupported map data %q", dataPart)
		}
		d.data = []nftables.SetDatatype{t}
	}
	return d, nil
}

// typeOfField is the datatype of one expression of a typeof declaration; a numgen value only
// in a key.
func typeOfField(field string, key bool) (nftables.SetDatatype, bool) {
	switch {
	case field == "ip daddr":
		return nftables.TypeIPAddr, true
	case field == "ip6 daddr":
		return nftables.TypeIP6Addr, true
	case field == "meta l4proto":
		return nftables.TypeInetProto, true
	case strings.HasSuffix(field, " dport"):
		return nftables.TypeInetService, true
	case key && field == "numgen random mod 1":
		return nftables.TypeInteger, true
	}
	return nftables.SetDatatype{}, false
}

func concat(types []nftables.SetDatatype) (nftables.SetDatatype, error) {
	if len(types) == 1 {
		return types[0], nil
	}
	return nftables.ConcatSetType(types...)
}

// describe fills the type fields of s.
func (d *setDef) describe(s *nftables.Set) error {
	var err error
	if s.KeyType, err = concat(d.key); err != nil {
		return err
	}
	s.Concatenation = len(d.key) > 1
	s.Interval = d.interval
	if d.key[0] == nftables.TypeInteger {
		s.KeyByteOrder = binaryutil.NativeEndian
	}
	switch {
	case d.verdict:
		s.IsMap, s.DataType = true, nftables.TypeVerdict
	case d.data != nil:
		s.IsMap = true
		s.DataType, err = concat(d.data)
	}
	return err
}

// encode turns one element, as the renderer spells it, into what the kernel stores; an
// interval element (a prefix) becomes its start and the end that follows it. A deleted
// element needs only its key.
func (d *setDef) encode(key, value []string, keyOnly bool) ([]nftables.SetElement, error) {
	if d.interval {
		if len(key) != 1 || len(d.key) != 1 {
			return nil, fmt.Errorf("interval element %q", key)
		}
		p, err := netip.ParsePrefix(key[0])
		if err != nil {
			return nil, err
		}
		p = p.Masked()
		out := []nftables.SetElement{{Key: p.Addr().AsSlice()}}
		if end, ok := prefixEnd(p); ok {
			out = append(out, nftables.SetElement{Key: end.AsSlice(), IntervalEnd: true})
		}
		return out, nil
	}
	fields := splitFields(key)
	k, err := encodeFields(d.key, fields)
	if err != nil {
		return nil, err
	}
	el := nftables.SetElement{Key: k}
	if keyOnly || (!d.verdict && d.data == nil) {
		return []nftables.SetElement{el}, nil
	}
	if len(value) != 1 {
		return nil, fmt.Errorf("map element %q without one value", key)
	}
	if d.verdict {
		v, err := parseVerdict(value[0])
		el.VerdictData = v
		return []nftables.SetElement{el}, err
	}
	el.Val, err = encodeFields(d.data, strings.Split(value[0], " . "))
	return []nftables.SetElement{el}, err
}

func splitFields(key []string) []string {
	var out []string
	for _, k := range key {
		out = append(out, strings.Split(k, " . ")...)
	}
	return out
}

// encodeFields encodes a concatenation, each field padded to 4 bytes; a lone field keeps its
// size.
func encodeFields(types []nftables.SetDatatype, fields []string) ([]byte, error) {
	if len(fields) != len(types) {
		return nil, fmt.Errorf("%d fields for %d types", len(fields), len(types))
	}
	var out []byte
	for i, t := range types {
		b, err := encodeField(t, fields[i])
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
		if len(types) > 1 {
			for len(out)%4 != 0 {
				out = append(out, 0)
			}
		}
	}
	return out, nil
}

// decodeField spells an address or a port as nft lists it.
func decodeField(t nftables.SetDatatype, b []byte) (string, error) {
	if uint32(len(b)) < t.Bytes {
		return "", fmt.Errorf("%d bytes for a %s", len(b), t.Name)
	}
	switch t {
	case nftables.TypeIPAddr, nftables.TypeIP6Addr:
		a, _ := netip.AddrFromSlice(b[:t.Bytes])
		return a.String(), nil
	case nftables.TypeInetService:
		return strconv.Itoa(int(binaryutil.BigEndian.Uint16(b))), nil
	}
	return "", fmt.Errorf("unsupported type %s", t.Name)
}

func encodeField(t nftables.SetDatatype, s string) ([]byte, error) {
	switch t {
	case nftables.TypeIPAddr, nftables.TypeIP6Addr:
		a, err := netip.ParseAddr(s)
		if err != nil || uint32(len(a.AsSlice())) != t.Bytes {
			return nil, fmt.Errorf("bad %s %q", t.Name, s)
		}
		return a.AsSlice(), nil
	case nftables.TypeInetProto:
		p, ok := protocolNumber(s)
		if !ok {
			return nil, fmt.Errorf("bad protocol %q", s)
		}
		return []byte{p}, nil
	case nftables.TypeInetService:
		n, err := strconv.ParseUint(s, 10, 16)
		return binaryutil.BigEndian.PutUint16(uint16(n)), err
	case nftables.TypeInteger, nftables.TypeMark:
		n, err := strconv.ParseUint(s, 0, 32)
		return binaryutil.NativeEndian.PutUint32(uint32(n)), err
	}
	return nil, fmt.Errorf("unsupported type %s", t.Name)
}

func parseVerdict(v string) (*expr.Verdict, error) {
	switch f := strings.Fields(v); {
	case len(f) == 2 && f[0] == "goto":
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: f[1]}, nil
	case len(f) == 2 && f[0] == "jump":
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: f[1]}, nil
	case v == "drop":
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case v == "accept":
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	}
	return nil, fmt.Errorf("unsupported verdict %q", v)
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
