package dataplane

import (
	"strings"

	"sigs.k8s.io/knftables"
)

// tableModel is what the netlink backend's own batches left in the kernel: every chain with
// its rules (as the renderer spells them) and every set and map with its elements. Batches
// update it after the kernel accepted them, at the cost of the batch (never of the table), so
// that a drift check can tell the agent's own writes from anyone else's.
type tableModel struct {
	// known is false until a batch that deletes and recreates the table (a full sync) has been
	// applied: before that, what else the table holds is not known.
	known  bool
	exists bool
	chains map[string]*modelChain
	sets   map[string]*modelSet
}

type modelChain struct {
	def   *knftables.Chain
	rules []string
}

type modelSet struct {
	// dynamic sets (the session-affinity sets) are filled by packets, not by the agent: their
	// elements are nobody's drift.
	dynamic bool
	elems   map[string][]string // key fields joined by " . " → value
}

func newTableModel() *tableModel {
	return &tableModel{chains: map[string]*modelChain{}, sets: map[string]*modelSet{}}
}

// apply replays one accepted batch.
func (m *tableModel) apply(ops []op) {
	for _, o := range ops {
		switch obj := o.obj.(type) {
		case *knftables.Table:
			m.table(o.verb)
		case *knftables.Chain:
			m.chain(o.verb, obj)
		case *knftables.Rule:
			if c := m.chains[obj.Chain]; c != nil {
				c.rules = append(c.rules, obj.Rule)
			}
		case *knftables.Set:
			m.set(o.verb, obj.Name, obj.Flags, obj.Timeout != nil)
		case *knftables.Map:
			m.set(o.verb, obj.Name, obj.Flags, obj.Timeout != nil)
		case *knftables.Element:
			s := m.sets[obj.Set+obj.Map]
			if s == nil {
				continue
			}
			key := strings.Join(obj.Key, " . ")
			if o.verb == opDelete {
				delete(s.elems, key)
			} else {
				s.elems[key] = obj.Value
			}
		}
	}
}

func (m *tableModel) table(verb opVerb) {
	switch verb {
	case opAdd:
		m.exists = true
	case opDelete:
		m.known, m.exists = true, false
		clear(m.chains)
		clear(m.sets)
	case opFlush:
		for _, c := range m.chains {
			c.rules = nil
		}
		for _, s := range m.sets {
			clear(s.elems)
		}
	}
}

func (m *tableModel) chain(verb opVerb, obj *knftables.Chain) {
	switch verb {
	case opAdd:
		if m.chains[obj.Name] == nil {
			m.chains[obj.Name] = &modelChain{def: obj}
		}
	case opDelete:
		delete(m.chains, obj.Name)
	case opFlush:
		if c := m.chains[obj.Name]; c != nil {
			c.rules = nil
		}
	}
}

func (m *tableModel) set(verb opVerb, name string, flags []knftables.SetFlag, timeout bool) {
	switch verb {
	case opAdd:
		if m.sets[name] == nil {
			dynamic := timeout
			for _, f := range flags {
				dynamic = dynamic || f == knftables.DynamicFlag || f == knftables.TimeoutFlag
			}
			m.sets[name] = &modelSet{dynamic: dynamic, elems: map[string][]string{}}
		}
	case opDelete:
		delete(m.sets, name)
	case opFlush:
		if s := m.sets[name]; s != nil {
			clear(s.elems)
		}
	}
}
