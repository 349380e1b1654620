package nftext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Rule spells a rule's statements, separated by spaces.
func Rule(fam ruleset.Family, stmts []ruleset.Stmt) string {
	var b strings.Builder
	for i, s := range stmts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(stmt(fam, s))
	}
	return b.String()
}

func stmt(fam ruleset.Family, s ruleset.Stmt) string {
	sel := selector(fam)
	switch s := s.(type) {
	case *ruleset.Lookup:
		if s.Invert {
			return fields(fam, s.Fields) + " != @" + s.Set
		}
		return fields(fam, s.Fields) + " @" + s.Set
	case *ruleset.VerdictMap:
		return fields(fam, s.Fields) + " vmap @" + s.Map
	case *ruleset.Compare:
		op := " "
		if s.Invert {
			op = " != "
		}
		return field(fam, s.Field) + op + Value(s.Value)
	case *ruleset.CtStatusDNAT:
		return "ct status dnat"
	case *ruleset.CtStateNew:
		return "ct state new"
	case *ruleset.FibDaddrLocal:
		return "fib daddr type local"
	case *ruleset.MarkSet:
		op := "or"
		if s.Xor {
			op = "xor"
		}
		return fmt.Sprintf("meta mark set meta mark %s %#x", op, s.Bits)
	case *ruleset.MarkTest:
		return fmt.Sprintf("meta mark and %#x != 0", s.Mask)
	case *ruleset.Masquerade:
		return "masquerade fully-random"
	case *ruleset.Reject:
		if s.TCPReset {
			return "reject with tcp reset"
		}
		return "reject"
	case *ruleset.DNATPick:
		return "dnat " + sel + " addr . port to " + fields(fam, s.Fields) + " . numgen random mod " +
			strconv.FormatUint(uint64(s.Mod), 10) + " map @" + s.Map
	case *ruleset.DNATClient:
		return "dnat " + sel + " to " + sel + " saddr map @" + s.AddrMap + " : " + sel + " saddr map @" + s.PortMap
	case *ruleset.Update:
		return "update @" + s.Set + " { " + field(fam, s.Key) + " : " + field(fam, s.Data) + " }"
	case *ruleset.Verdict:
		return verdict(s)
	}
	panic(fmt.Sprintf("nftext: unknown statement %T", s))
}

func verdict(v *ruleset.Verdict) string {
	switch v.Kind {
	case ruleset.Jump:
		return "jump " + v.Chain
	case ruleset.Goto:
		return "goto " + v.Chain
	}
	return "drop"
}

func selector(fam ruleset.Family) string {
	if fam == ruleset.IPv6 {
		return "ip6"
	}
	return "ip"
}

func fields(fam ruleset.Family, fs []ruleset.Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = field(fam, f)
	}
	return strings.Join(names, " . ")
}

func field(fam ruleset.Family, f ruleset.Field) string {
	switch f.Kind {
	case ruleset.SAddr:
		return selector(fam) + " saddr"
	case ruleset.DAddr:
		return selector(fam) + " daddr"
	case ruleset.L4Proto:
		return "meta l4proto"
	case ruleset.THDport:
		return "th dport"
	case ruleset.Dport:
		return f.Proto.Name() + " dport"
	case ruleset.Numgen:
		return "numgen random mod 1"
	}
	panic(fmt.Sprintf("nftext: unknown field %d", f.Kind))
}
