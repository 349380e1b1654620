package dataplane

import (
	"sync"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// Generations is what the kernel backends of one network namespace know of its nftables
// ruleset generation, which every committed transaction moves by one, whoever commits it and
// whatever table it touches. A drift check skips reading its table while the generation is one
// at which its backend knew the table (see CheckDrift). Syncers that program the same namespace
// (the agent's two IP families) share one through Options.Generations, so that one family's
// write, which the other family's table did not see, does not make the other's next check
// read its table; a Syncer made without one has its own.
type Generations struct {
	mu    sync.Mutex
	known map[*genTracker]uint32
}

// NewGenerations returns an empty Generations.
func NewGenerations() *Generations {
	return &Generations{known: map[*genTracker]uint32{}}
}

// genTracker is one backend's part of a Generations, with what the backend alone needs to know
// of the generation around its reads and writes (under the backend's lock).
type genTracker struct {
	g *Generations
	// read is the generation right before the backend's last read of its table (noteRead): the
	// one a full sync planned from.
	read genReading
	// hook, when set (by tests), runs right after each transaction commits, before the
	// generation is read back: where another writer's commit can slip in.
	hook func()
}

// keepsGenerations is a backend that knows the ruleset generation (the kernel backends).
type keepsGenerations interface{ generations() *genTracker }

func (b *netlinkBackend) generations() *genTracker   { return b.gens }
func (k *nftKernelBackend) generations() *genTracker { return k.gens }

// noteRead records the generation right before a read of the table: a write after it makes the
// next drift check look.
func (t *genTracker) noteRead() { t.read = readGeneration() }

// before returns what a transaction of ops will build on (commitBase), read before it runs.
func (t *genTracker) before(ops, table []ruleset.Op) genReading {
	if len(ops) == 0 {
		return genReading{}
	}
	return commitBase(ops, table, t.current(), t.read)
}

// after records what a transaction of ops, which built on base, left. One that wrote nothing
// (a full sync that found the table as wanted) leaves the table as the read it planned from saw.
func (t *genTracker) after(ops []ruleset.Op, base genReading) {
	if len(ops) == 0 {
		t.settle(t.read)
		return
	}
	if t.hook != nil {
		t.hook()
	}
	t.committed(base)
}

func newGenTracker(g *Generations) *genTracker {
	if g == nil {
		g = NewGenerations()
	}
	return &genTracker{g: g}
}

// current is the generation at which the table was last known to be what the backend's model
// says, if any.
func (t *genTracker) current() genReading {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	gen, ok := t.g.known[t]
	return genReading{gen, ok}
}

// at reports whether the table is known to be the backend's own at generation gen.
func (t *genTracker) at(gen uint32) bool {
	c := t.current()
	return c.known && c.gen == gen
}

// vouch records that the table was the backend's own at gen (a check read it, or a full sync
// planned from a read at gen and wrote nothing).
func (t *genTracker) vouch(gen uint32) {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	t.g.known[t] = gen
}

// forget makes the next drift check read the table.
func (t *genTracker) forget() {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	delete(t.g.known, t)
}

// committed reads the generation right after one of the backend's transactions, which built on
// base (commitBase), and records what it says. Every commit moves the generation by one, so one
// step past base means nobody else committed in between: the table is the backend's own at the
// new generation, and so is every other table of the namespace that was known at base (the
// transaction touched only this one). Anything else, a stranger's commit before the backend's or
// between it and this read, leaves the generation unknown and the next check reads the table.
// Taking the generation after a write as the backend's own whatever it was would hide such a
// change from every check until the next full sync.
func (t *genTracker) committed(base genReading) {
	after := readGeneration()
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	if !base.known || !after.known || after.gen != base.gen+1 {
		delete(t.g.known, t)
		return
	}
	for other, gen := range t.g.known {
		if gen == base.gen {
			t.g.known[other] = after.gen
		}
	}
	t.g.known[t] = after.gen
}

// genReading is a ruleset generation and whether it is known.
type genReading struct {
	gen   uint32
	known bool
}

func readGeneration() genReading {
	gen, err := generation()
	return genReading{gen, err == nil}
}

// commitBase is the generation a transaction of ops builds on: the last one at which the agent
// knew the table. A full sync that compared the table builds on the read it planned from, an
// incremental one on the last generation its writes or drift checks left; a rebuild deletes
// the table first, so it builds on nothing but the generation right before it (read here).
func commitBase(ops, table []ruleset.Op, last, read genReading) genReading {
	switch {
	case rebuilds(ops):
		return readGeneration()
	case table != nil:
		return read
	}
	return last
}

// rebuilds reports whether ops delete the table before anything else: what such a transaction
// leaves does not depend on what the table held.
func rebuilds(ops []ruleset.Op) bool {
	for _, o := range ops {
		if _, ok := o.Obj.(*ruleset.Table); !ok {
			return false
		}
		if o.Verb == ruleset.Delete {
			return true
		}
	}
	return false
}

// settle records the outcome of a full sync that wrote nothing: the table is what the read it
// planned from saw, at that read's generation.
func (t *genTracker) settle(read genReading) {
	if read.known {
		t.vouch(read.gen)
	} else {
		t.forget()
	}
}
