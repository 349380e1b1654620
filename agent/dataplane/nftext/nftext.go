// Package nftext spells ruleset values in nft's language, as knftables objects, for the
// backends that drive the nft program (or knftables' in-memory fake).
package nftext

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Transaction adds ops to tx.
func Transaction(tx *knftables.Transaction, fam ruleset.Family, ops []ruleset.Op) {
	for o := range ruleset.All(ops) {
		obj := Object(fam, o.Obj)
		switch o.Verb {
		case ruleset.Add:
			tx.Add(obj)
		case ruleset.Delete:
			tx.Delete(obj)
		case ruleset.Flush:
			tx.Flush(obj)
		}
	}
}

// Object spells one object.
func Object(fam ruleset.Family, obj ruleset.Object) knftables.Object {
	switch o := obj.(type) {
	case *ruleset.Table:
		t := &knftables.Table{}
		if o.Comment != "" {
			t.Comment = knftables.PtrTo(o.Comment)
		}
		return t
	case *ruleset.Chain:
		return chain(o)
	case *ruleset.Rule:
		return &knftables.Rule{Chain: o.Chain, Rule: Rule(fam, o.Stmts)}
	case *ruleset.Set:
		return set(fam, o)
	case *ruleset.Element:
		return element(o)
	}
	panic(fmt.Sprintf("nftext: unknown object %T", obj))
}

var (
	chainTypes = map[ruleset.ChainType]knftables.BaseChainType{
		ruleset.NATChain: knftables.NATType, ruleset.FilterChain: knftables.FilterType,
	}
	hooks = map[ruleset.Hook]knftables.BaseChainHook{
		ruleset.Prerouting: knftables.PreroutingHook, ruleset.Input: knftables.InputHook,
		ruleset.Forward: knftables.ForwardHook, ruleset.Output: knftables.OutputHook,
		ruleset.Postrouting: knftables.PostroutingHook,
	}
	priorities = map[ruleset.Priority]knftables.BaseChainPriority{
		ruleset.DNATPriority: knftables.DNATPriority, ruleset.SNATPriority: knftables.SNATPriority,
		ruleset.FilterPriority: knftables.FilterPriority,
	}
)

func chain(c *ruleset.Chain) *knftables.Chain {
	out := &knftables.Chain{Name: c.Name}
	if c.Base != nil {
		t, h, p := chainTypes[c.Base.Type], hooks[c.Base.Hook], priorities[c.Base.Priority]
		out.Type, out.Hook, out.Priority = &t, &h, &p
	}
	return out
}

func set(fam ruleset.Family, s *ruleset.Set) knftables.Object {
	var flags []knftables.SetFlag
	for _, f := range s.Flags {
		flags = append(flags, setFlags[f])
	}
	if !s.IsMap() {
		return &knftables.Set{Name: s.Name, Type: types(fam, s.Key), Flags: flags}
	}
	m := &knftables.Map{Name: s.Name, Flags: flags}
	if len(s.KeyOf) > 0 {
		m.TypeOf = fields(fam, s.KeyOf) + " : " + fields(fam, s.DataOf)
	} else {
		m.Type = types(fam, s.Key) + " : " + types(fam, s.Data)
	}
	if s.Timeout != 0 {
		m.Timeout = knftables.PtrTo(s.Timeout)
	}
	if s.Size != 0 {
		m.Size = knftables.PtrTo(s.Size)
	}
	return m
}

var setFlags = map[ruleset.SetFlag]knftables.SetFlag{
	ruleset.Interval: knftables.IntervalFlag, ruleset.Dynamic: knftables.DynamicFlag, ruleset.HasTimeout: knftables.TimeoutFlag,
}

var typeNames = map[ruleset.Type]string{
	ruleset.IPv4Addr: "ipv4_addr", ruleset.IPv6Addr: "ipv6_addr", ruleset.InetProto: "inet_proto",
	ruleset.InetService: "inet_service", ruleset.VerdictType: "verdict",
}

func types(_ ruleset.Family, ts []ruleset.Type) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = typeNames[t]
	}
	return strings.Join(names, " . ")
}

func element(e *ruleset.Element) *knftables.Element {
	out := &knftables.Element{Key: Values(e.Key)}
	if e.Map {
		out.Map = e.Set
	} else {
		out.Set = e.Set
	}
	switch {
	case e.Verdict != nil:
		out.Value = []string{verdict(e.Verdict)}
	case len(e.Value) > 0:
		out.Value = []string{strings.Join(Values(e.Value), " . ")}
	}
	if e.Comment != "" {
		out.Comment = knftables.PtrTo(e.Comment)
	}
	return out
}

// Values spells each value as its own field.
func Values(vals []ruleset.Value) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = Value(v)
	}
	return out
}

// Value spells one value.
func Value(v ruleset.Value) string {
	switch v.Kind {
	case ruleset.AddrValue:
		return v.Addr.String()
	case ruleset.PrefixValue:
		if p := v.Prefix(); !p.IsSingleIP() {
			return p.String()
		}
		return v.Addr.String()
	case ruleset.ProtoValue:
		return ruleset.Protocol(v.Num).Name()
	}
	return strconv.FormatUint(uint64(v.Num), 10)
}

// ParseKey reads back a key spelled by Values (fields joined by " . ") for an element of s.
func ParseKey(s *ruleset.Set, key string) ([]ruleset.Value, error) {
	kinds := keyKinds(s)
	parts := strings.Split(key, " . ")
	if len(parts) != len(kinds) {
		return nil, fmt.Errorf("key %q of %s: %d fields, want %d", key, s.Name, len(parts), len(kinds))
	}
	out := make([]ruleset.Value, len(parts))
	for i, p := range parts {
		v, err := parseValue(kinds[i], p)
		if err != nil {
			return nil, fmt.Errorf("key %q of %s: %w", key, s.Name, err)
		}
		out[i] = v
	}
	return out, nil
}

// keyKinds are the kinds of value each field of s's key holds.
func keyKinds(s *ruleset.Set) []ruleset.ValueKind {
	var out []ruleset.ValueKind
	for _, t := range s.Key {
		switch t {
		case ruleset.IPv4Addr, ruleset.IPv6Addr:
			out = append(out, ruleset.AddrValue)
		case ruleset.InetProto:
			out = append(out, ruleset.ProtoValue)
		default:
			out = append(out, ruleset.PortValue)
		}
	}
	for _, f := range s.KeyOf {
		switch f.Kind {
		case ruleset.SAddr, ruleset.DAddr:
			out = append(out, ruleset.AddrValue)
		case ruleset.L4Proto:
			out = append(out, ruleset.ProtoValue)
		case ruleset.Numgen:
			out = append(out, ruleset.IndexValue)
		default:
			out = append(out, ruleset.PortValue)
		}
	}
	return out
}

func parseValue(kind ruleset.ValueKind, s string) (ruleset.Value, error) {
	switch kind {
	case ruleset.AddrValue:
		if p, err := netip.ParsePrefix(s); err == nil {
			return ruleset.Prefix(p), nil
		}
		a, err := netip.ParseAddr(s)
		return ruleset.Addr(a), err
	case ruleset.ProtoValue:
		for _, p := range []ruleset.Protocol{ruleset.TCP, ruleset.UDP, ruleset.SCTP} {
			if p.Name() == s {
				return ruleset.Proto(p), nil
			}
		}
		n, err := strconv.ParseUint(s, 10, 8)
		return ruleset.Proto(ruleset.Protocol(n)), err
	case ruleset.IndexValue:
		n, err := strconv.ParseUint(s, 10, 32)
		return ruleset.Value{Kind: ruleset.IndexValue, Num: uint32(n)}, err
	}
	n, err := strconv.ParseUint(s, 10, 16)
	return ruleset.Port(uint16(n)), err
}
