package ruleset

import (
	"fmt"
	"hash"
)

// Stmt is one statement of a rule.
type Stmt interface{ isStmt() }

// FieldKind is a packet field a rule reads.
type FieldKind uint8

const (
	SAddr   FieldKind = iota + 1 // the network header's source address
	DAddr                        // the network header's destination address
	L4Proto                      // meta l4proto
	THDport                      // the transport header's destination port, whatever the protocol
	Dport                        // the destination port of Field.Proto, which the rule matched before
	Numgen                       // a random number mod 1: only in a map's KeyOf, for the index's type
)

// Field is a packet field.
type Field struct {
	Kind  FieldKind
	Proto Protocol // Dport only
}

// Lookup matches when the fields, concatenated, are (Invert: are not) in Set.
type Lookup struct {
	Fields []Field
	Set    string
	Invert bool
}

// VerdictMap jumps or goes where Map's element for the concatenated fields says; no element,
// no verdict.
type VerdictMap struct {
	Fields []Field
	Map    string
}

// Compare matches a field against a protocol (ProtoValue), an address (AddrValue) or a prefix
// (PrefixValue).
type Compare struct {
	Field  Field
	Invert bool
	Value  Value
}

// CtStatusDNAT matches a connection whose destination was NATed.
type CtStatusDNAT struct{}

// CtStateNew matches a connection's first packet.
type CtStateNew struct{}

// FibDaddrLocal matches a packet to an address of this host.
type FibDaddrLocal struct{}

// MarkSet sets Bits in the packet mark (Xor: toggles them).
type MarkSet struct {
	Bits uint32
	Xor  bool
}

// MarkTest matches a packet whose mark has one of Mask's bits.
type MarkTest struct{ Mask uint32 }

// Masquerade masquerades with a fully random source port.
type Masquerade struct{}

// Reject refuses the packet: with a TCP reset, or with port unreachable.
type Reject struct{ TCPReset bool }

// DNATPick sends the connection to the address and port Map holds for the concatenated fields
// followed by a random index below Mod.
type DNATPick struct {
	Fields []Field
	Mod    uint32
	Map    string
}

// DNATClient sends a known client to the address AddrMap holds for its source address and the
// port PortMap holds for it; an unknown one falls through.
type DNATClient struct{ AddrMap, PortMap string }

// Update adds or refreshes Set's element Key -> Data from the packet.
type Update struct {
	Set       string
	Key, Data Field
}

// VerdictKind is what a Verdict does.
type VerdictKind uint8

const (
	Jump VerdictKind = iota + 1
	Goto
	Drop
)

// Verdict ends the rule: jump to or go to Chain, or drop.
type Verdict struct {
	Kind  VerdictKind
	Chain string
}

func (*Lookup) isStmt()        {}
func (*VerdictMap) isStmt()    {}
func (*Compare) isStmt()       {}
func (*CtStatusDNAT) isStmt()  {}
func (*CtStateNew) isStmt()    {}
func (*FibDaddrLocal) isStmt() {}
func (*MarkSet) isStmt()       {}
func (*MarkTest) isStmt()      {}
func (*Masquerade) isStmt()    {}
func (*Reject) isStmt()        {}
func (*DNATPick) isStmt()      {}
func (*DNATClient) isStmt()    {}
func (*Update) isStmt()        {}
func (*Verdict) isStmt()       {}

// Sum writes rules to h in a form that tells any two different rule lists apart, so a planner
// can remember a chain's content by a digest.
func Sum(h hash.Hash, rules [][]Stmt) {
	for _, r := range rules {
		for _, s := range r {
			fmt.Fprintf(h, "%T%+v;", s, s)
		}
		h.Write([]byte{0})
	}
}
