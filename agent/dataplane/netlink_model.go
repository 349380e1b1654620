package dataplane

import (
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// tableModel is what a backend's own batches left in the kernel: every chain with its rules and
// every set and map with its elements, as ruleset values. Batches update it after the kernel
// accepted them, at the cost of the batch (never of the table), so that a drift check can tell
// the agent's own writes from anyone else's.
type tableModel struct {
	// known is false until a full sync has been applied (one that rebuilt the table, or one
	// that compared it with the kernel's): before that, what else the table holds is not known.
	known  bool
	exists bool
	chains map[string]*modelChain
	sets   map[string]*modelSet
}

type modelChain struct {
	def   *ruleset.Chain
	rules [][]ruleset.Stmt
}

type modelSet struct {
	def *ruleset.Set
	// dynamic sets (the session-affinity sets) are filled by packets, not by the agent: their
	// elements are nobody's drift.
	dynamic bool
	elems   map[elemKey]*ruleset.Element
}

// elemKey identifies an element within its set: its key, up to four fields.
type elemKey [4]ruleset.Value

func elemKeyOf(vals []ruleset.Value) elemKey {
	var k elemKey
	copy(k[:], vals)
	return k
}

func newTableModel() *tableModel {
	return &tableModel{chains: map[string]*modelChain{}, sets: map[string]*modelSet{}}
}

// reset starts the model over from table, every object the table holds (see Backend.apply).
func (m *tableModel) reset(table []ruleset.Op) {
	m.table(ruleset.Delete)
	m.exists = true
	m.apply(table)
}

// apply replays one accepted batch.
func (m *tableModel) apply(ops []ruleset.Op) {
	for _, o := range ops {
		switch obj := o.Obj.(type) {
		case *ruleset.Table:
			m.table(o.Verb)
		case *ruleset.Chain:
			m.chain(o.Verb, obj)
		case *ruleset.Rule:
			if c := m.chains[obj.Chain]; c != nil {
				c.rules = append(c.rules, obj.Stmts)
			}
		case *ruleset.Set:
			m.set(o.Verb, obj)
		case *ruleset.Element:
			s := m.sets[obj.Set]
			if s == nil {
				continue
			}
			key := elemKeyOf(obj.Key)
			if o.Verb == ruleset.Delete {
				delete(s.elems, key)
			} else {
				s.elems[key] = obj
			}
		}
	}
}

func (m *tableModel) table(verb ruleset.Verb) {
	switch verb {
	case ruleset.Add:
		m.exists = true
	case ruleset.Delete:
		m.known, m.exists = true, false
		clear(m.chains)
		clear(m.sets)
	case ruleset.Flush:
		for _, c := range m.chains {
			c.rules = nil
		}
		for _, s := range m.sets {
			clear(s.elems)
		}
	}
}

func (m *tableModel) chain(verb ruleset.Verb, obj *ruleset.Chain) {
	switch verb {
	case ruleset.Add:
		if m.chains[obj.Name] == nil {
			m.chains[obj.Name] = &modelChain{def: obj}
		}
	case ruleset.Delete:
		delete(m.chains, obj.Name)
	case ruleset.Flush:
		if c := m.chains[obj.Name]; c != nil {
			c.rules = nil
		}
	}
}

func (m *tableModel) set(verb ruleset.Verb, obj *ruleset.Set) {
	switch verb {
	case ruleset.Add:
		if m.sets[obj.Name] == nil {
			dynamic := obj.Timeout != 0
			for _, f := range obj.Flags {
				dynamic = dynamic || f == ruleset.Dynamic || f == ruleset.HasTimeout
			}
			m.sets[obj.Name] = &modelSet{def: obj, dynamic: dynamic, elems: map[elemKey]*ruleset.Element{}}
		}
	case ruleset.Delete:
		delete(m.sets, obj.Name)
	case ruleset.Flush:
		if s := m.sets[obj.Name]; s != nil {
			clear(s.elems)
		}
	}
}
