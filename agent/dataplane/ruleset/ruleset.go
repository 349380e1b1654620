// Package ruleset describes what the dataplane asks of nftables as Go values: the operations of
// one transaction on the agent's table, and the chains, rules, sets, maps and elements they
// carry. Planning produces them once; each backend translates them its own way (package nftext
// into nft's language, package netlinkenc into netlink objects), so that no backend reads what
// another one wrote and a rule means the same whichever way it reaches the kernel.
//
// The values say only what the agent writes: a statement or field the planner never uses has no
// type here, so a backend's translation is total.
package ruleset

import (
	"net/netip"
	"time"
)

// Family is the table's address family.
type Family uint8

const (
	IPv4 Family = iota + 1
	IPv6
)

// Verb is what an operation does to its object.
type Verb uint8

const (
	Add Verb = iota
	Delete
	Flush
)

// Op is one operation of a transaction.
type Op struct {
	Verb Verb
	Obj  Object
}

// Object is a *Table, *Chain, *Rule, *Set or *Element.
type Object interface{ isObject() }

// Table is the agent's table (its name and family belong to the backend).
type Table struct{ Comment string }

// Chain is a chain; Base is set for a chain attached to a hook.
type Chain struct {
	Name string
	Base *BaseChain
}

// BaseChain is where a base chain hooks in.
type BaseChain struct {
	Type     ChainType
	Hook     Hook
	Priority Priority
}

type (
	ChainType uint8
	Hook      uint8
	Priority  uint8
)

const (
	NATChain ChainType = iota + 1
	FilterChain
)

const (
	Prerouting Hook = iota + 1
	Input
	Forward
	Output
	Postrouting
)

const (
	DNATPriority   Priority = iota + 1 // -100
	SNATPriority                       // 100
	FilterPriority                     // 0
)

// Rule is one rule appended to a chain: its statements in order.
type Rule struct {
	Chain string
	Stmts []Stmt
}

// Set is a set, or a map when it has data. Its key and data are declared either by type (Key,
// Data) or by the expressions that fill them (KeyOf, DataOf).
type Set struct {
	Name          string
	Key, Data     []Type
	KeyOf, DataOf []Field
	Flags         []SetFlag
	Timeout       time.Duration // zero: none
	Size          uint64        // zero: none
}

// IsMap tells a map from a set.
func (s *Set) IsMap() bool { return len(s.Data) > 0 || len(s.DataOf) > 0 }

// Type is the type of one field of a set's key or data.
type Type uint8

const (
	IPv4Addr Type = iota + 1
	IPv6Addr
	InetProto
	InetService
	VerdictType // only as a map's whole data
)

// SetFlag is a flag of a set or map.
type SetFlag uint8

const (
	Interval SetFlag = iota + 1
	Dynamic
	HasTimeout
)

// Element is one element of a set or map. A map's element has Value or Verdict; an element
// being deleted needs only its key.
type Element struct {
	Set     string
	Map     bool // Set names a map
	Key     []Value
	Value   []Value
	Verdict *Verdict
	Comment string
}

func (*Table) isObject()   {}
func (*Chain) isObject()   {}
func (*Rule) isObject()    {}
func (*Set) isObject()     {}
func (*Element) isObject() {}

// ValueKind says which field of a Value holds it.
type ValueKind uint8

const (
	AddrValue ValueKind = iota + 1
	PrefixValue
	ProtoValue
	PortValue
	IndexValue // a numgen index
)

// Value is one field of an element's key or data. It is comparable, so keys can index maps.
//
// Kind comes last so that the struct packs into 32 bytes: a table holds hundreds of thousands
// of elements of up to three Values each.
type Value struct {
	Addr netip.Addr // AddrValue, PrefixValue
	Num  uint32     // PortValue, IndexValue, ProtoValue (the IP protocol number), PrefixValue (bits)
	Kind ValueKind
}

func Addr(a netip.Addr) Value { return Value{Kind: AddrValue, Addr: a} }
func Port(p uint16) Value     { return Value{Kind: PortValue, Num: uint32(p)} }
func Index(i int) Value       { return Value{Kind: IndexValue, Num: uint32(i)} }
func Proto(p Protocol) Value  { return Value{Kind: ProtoValue, Num: uint32(p)} }
func Prefix(p netip.Prefix) Value {
	return Value{Kind: PrefixValue, Addr: p.Addr(), Num: uint32(p.Bits())}
}

// Prefix returns a PrefixValue's prefix.
func (v Value) Prefix() netip.Prefix { return netip.PrefixFrom(v.Addr, int(v.Num)) }

// Protocol is an IP protocol number.
type Protocol uint8

const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

// Name is the protocol as nft names it.
func (p Protocol) Name() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return ""
}
