// Package nftext spells ruleset values in nft's language, as knftables objects, for the
// backends that drive the nft program (or knftables' in-memory fake).
package nftext

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Transaction adds ops to tx.
func Transaction(tx *knftables.Transaction, fam ruleset.Family, ops []ruleset.Op) {
	for _, o := range ops {
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
