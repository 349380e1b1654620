package dataplane

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// tableModel is what a backend's own batches left in the kernel: every chain with its rules,
// every set and map with a digest of each of its elements. Batches update it after the kernel
// accepted them, at the cost of the batch (never of the table), so that a drift check can tell
// the agent's own writes from anyone else's.
//
// Elements are kept as digests, not as values: a drift check only needs to know whether the
// kernel's elements are the ones the batches wrote, and at hundreds of thousands of elements a
// second copy of each (the Syncer's records are the first) was most of the agent's memory.
type tableModel struct {
	// known is false until a full sync has been applied (one that rebuilt the table, or one
	// that compared it with the kernel's): before that, what else the table holds is not known.
	known  bool
	exists bool
	chains map[string]*modelChain
	sets   map[string]*modelSet
	// digest gives an element's digest as the kernel will hold it (see elemDigest); nil counts
	// elements only.
	digest func(*ruleset.Element) (elemDigest, error)
	// err is the first element digest could not take: the model cannot be compared until the
	// next full sync starts it over.
	err error
	// keys hashes element keys; two seeds make the 128-bit identity of a key.
	keys [2]maphash.Seed
	buf  []byte
	// spare holds the emptied maps of the sets a reset replaces, by name, for their successors.
	spare map[string]map[elemID]elemDigest
	// full keeps every element as well (tests only: they read the model back as a kernel's
	// table, see golden_harness_test.go).
	full bool
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
	elems   map[elemID]elemDigest
	// sum and pieces aggregate elems: the sum of their digests and the number of elements
	// the kernel holds for them (an interval is two).
	sum    uint64
	pieces int
	// values holds the elements themselves when the model is full.
	values map[elemID]*ruleset.Element
}

// elemID identifies an element within its set: a 128-bit hash of its key.
type elemID [2]uint64

// elemDigest is what the kernel holds for one element: the sum of the digests of the kernel
// elements it is encoded to (see kernelElementDigest), and their number.
type elemDigest struct {
	sum    uint64
	pieces uint32
}

func newTableModel(digest func(*ruleset.Element) (elemDigest, error)) *tableModel {
	return &tableModel{chains: map[string]*modelChain{}, sets: map[string]*modelSet{}, digest: digest,
		keys: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// idOf hashes an element's key fields.
func (m *tableModel) idOf(key []ruleset.Value) elemID {
	b := m.buf[:0]
	for _, v := range key {
		a := v.Addr.As16()
		b = append(b, byte(v.Kind))
		if v.Addr.Is4() {
			b = append(b, 4)
		} else {
			b = append(b, 6)
		}
		b = append(b, a[:]...)
		b = binary.BigEndian.AppendUint32(b, v.Num)
	}
	m.buf = b
	return elemID{maphash.Bytes(m.keys[0], b), maphash.Bytes(m.keys[1], b)}
}

// size is how many elements the model holds in set name.
func (m *tableModel) size(name string) int {
	if s := m.sets[name]; s != nil {
		return len(s.elems)
	}
	return 0
}

// reset starts the model over from table, every object the table holds (see Backend.apply).
// A set it held before takes its emptied map again, which keeps its room: after a full resync
// the sets hold about what they held, and growing every map from empty was most of what
// relearning the table allocated.
func (m *tableModel) reset(table []ruleset.Op) {
	m.spare = make(map[string]map[elemID]elemDigest, len(m.sets))
	for name, s := range m.sets {
		clear(s.elems)
		m.spare[name] = s.elems
	}
	m.table(ruleset.Delete)
	m.exists = true
	m.apply(table)
	m.spare = nil
}

// apply replays one accepted batch.
func (m *tableModel) apply(ops []ruleset.Op) {
	for o := range ruleset.All(ops) {
		m.applyOne(o)
	}
}

// loggedElement is what a batch learned of one element operation as it encoded it: enough for
// the model to record the element without rendering or encoding it again.
type loggedElement struct {
	id     elemID
	sum    uint64
	pieces uint32
	set    uint16 // in the batch's list of set names (batch.logSets)
	del    bool
}

// logs reports whether the model takes a batch's log of its elements (applyLogged): it keeps
// digests, and not the elements themselves.
func (m *tableModel) logs() bool { return m.digest != nil && !m.full }

// applyLogged is apply with the log of the batch's element operations, one per element in the
// order of ops (see pendingElements.add): a run's elements are not spelled out a second time.
func (m *tableModel) applyLogged(ops []ruleset.Op, log []loggedElement, sets []string) {
	adds := make([]int, len(sets))
	for _, le := range log {
		if !le.del {
			adds[le.set]++
		}
	}
	for _, o := range ops {
		n := 0
		switch obj := o.Obj.(type) {
		case *ruleset.Element:
			n = 1
		case *ruleset.Elements:
			n = obj.Count
		default:
			m.applyOne(o)
			continue
		}
		for _, le := range log[:n] {
			if s := m.sets[sets[le.set]]; s != nil {
				if len(s.elems) == 0 && adds[le.set] > 0 {
					// A set filled from empty (a cold sync's) gets its map at its final size
					// at once, rather than through every size on the way.
					s.elems, adds[le.set] = make(map[elemID]elemDigest, adds[le.set]), 0
				}
				m.record(s, le.id, le.del, elemDigest{sum: le.sum, pieces: le.pieces})
			}
		}
		log = log[n:]
	}
}

func (m *tableModel) applyOne(o ruleset.Op) {
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
		if s := m.sets[obj.Set]; s != nil {
			m.element(s, o.Verb, obj)
		}
	}
}

func (m *tableModel) element(s *modelSet, verb ruleset.Verb, obj *ruleset.Element) {
	id := m.idOf(obj.Key)
	var d elemDigest
	if verb != ruleset.Delete && m.digest != nil && !s.dynamic {
		var err error
		if d, err = m.digest(obj); err != nil && m.err == nil {
			m.err = err
		}
	}
	m.record(s, id, verb == ruleset.Delete, d)
	if s.values != nil && verb != ruleset.Delete {
		s.values[id] = obj.Clone() // a run's element is valid only while it is read
	}
}

// record replaces or deletes the element id of s. Elements of dynamic sets are counted only:
// packets fill those.
func (m *tableModel) record(s *modelSet, id elemID, del bool, d elemDigest) {
	if old, had := s.elems[id]; had {
		s.sum -= old.sum
		s.pieces -= int(old.pieces)
		delete(s.elems, id)
		delete(s.values, id)
	}
	if del {
		return
	}
	if s.dynamic || m.digest == nil {
		d = elemDigest{pieces: 1}
	}
	s.elems[id] = d
	s.sum += d.sum
	s.pieces += int(d.pieces)
}

func (m *tableModel) table(verb ruleset.Verb) {
	switch verb {
	case ruleset.Add:
		m.exists = true
	case ruleset.Delete:
		m.known, m.exists, m.err = true, false, nil
		clear(m.chains)
		clear(m.sets)
	case ruleset.Flush:
		for _, c := range m.chains {
			c.rules = nil
		}
		for _, s := range m.sets {
			s.clear()
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
			elems := m.spare[obj.Name]
			if elems == nil {
				elems = map[elemID]elemDigest{}
			}
			delete(m.spare, obj.Name)
			s := &modelSet{def: obj, dynamic: dynamic, elems: elems}
			if m.full {
				s.values = map[elemID]*ruleset.Element{}
			}
			m.sets[obj.Name] = s
		}
	case ruleset.Delete:
		delete(m.sets, obj.Name)
	case ruleset.Flush:
		if s := m.sets[obj.Name]; s != nil {
			s.clear()
		}
	}
}

func (s *modelSet) clear() {
	clear(s.elems)
	clear(s.values)
	s.sum, s.pieces = 0, 0
}
