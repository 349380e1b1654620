package dataplane

import (
	"fmt"
	"math"

	"github.com/google/nftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/netlinkenc"
	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

// run adds a run's elements; it must spell as many as it says, which keeps the batch's log in
// step with the operations.
func (t *batch) run(pend *pendingElements, verb ruleset.Verb, run *ruleset.Elements) error {
	n := 0
	var err error
	run.Each(func(e *ruleset.Element) bool {
		n++
		err = pend.add(t, verb, e)
		return err == nil
	})
	if err == nil && n != run.Count {
		err = fmt.Errorf("netlink backend: a run of %d elements spelled %d", run.Count, n)
	}
	return err
}

// pendingElements gathers consecutive element operations on one set, a few hundred per message
// (a netlink attribute holds at most 64 KiB).
type pendingElements struct {
	verb  ruleset.Verb
	name  string
	isMap bool
	def   *netlinkenc.SetDef
	set   *nftables.Set
	vals  []nftables.SetElement
	// logSet is the set's index in the batch's logSets.
	logSet uint16
}

const elementsPerMessage = 256

// add encodes el, sending what is pending first when el goes to another set or with another verb.
func (p *pendingElements) add(t *batch, verb ruleset.Verb, el *ruleset.Element) error {
	if p.set == nil || verb != p.verb || el.Set != p.name || el.Map != p.isMap {
		if err := p.flush(t); err != nil {
			return err
		}
		if err := p.start(t, verb, el); err != nil {
			return err
		}
	}
	first := len(p.vals)
	vals, err := p.def.AppendEncoded(p.vals, el, verb == ruleset.Delete)
	if err != nil {
		return fmt.Errorf("netlink backend: element of %s: %w", p.name, err)
	}
	p.vals = vals
	encoded := vals[first:]
	if el.Comment != "" && verb == ruleset.Add {
		encoded[0].Comment = el.Comment
	}
	if t.logging {
		d := t.b.encodedDigest(encoded)
		t.log = append(t.log, loggedElement{set: p.logSet, del: verb == ruleset.Delete, id: t.b.model.idOf(el.Key),
			sum: d.sum, pieces: d.pieces})
	}
	if len(p.vals) >= elementsPerMessage {
		return p.send(t)
	}
	return nil
}

func (p *pendingElements) start(t *batch, verb ruleset.Verb, el *ruleset.Element) error {
	if verb != ruleset.Add && verb != ruleset.Delete {
		return fmt.Errorf("netlink backend: elements are only added or deleted")
	}
	d, err := t.def(el.Set)
	if err != nil {
		return err
	}
	s := t.added[el.Set]
	if s == nil {
		s = &nftables.Set{Table: t.b.table, Name: el.Set}
		if err := d.Describe(s); err != nil {
			return err
		}
	}
	p.verb, p.name, p.isMap, p.def, p.set = verb, el.Set, el.Map, d, s
	if t.logging {
		i, ok := t.logIndex[el.Set]
		if !ok && len(t.logSets) > math.MaxUint16 {
			// More sets than a log entry can name: the model spells this batch out instead.
			t.logging, t.log = false, nil
			return nil
		}
		if !ok {
			i = uint16(len(t.logSets))
			t.logIndex[el.Set] = i
			t.logSets = append(t.logSets, el.Set)
		}
		p.logSet = i
	}
	return nil
}

// send adds the pending elements to the batch as one message.
func (p *pendingElements) send(t *batch) error {
	if len(p.vals) == 0 {
		return nil
	}
	var err error
	if p.verb == ruleset.Add {
		err = t.conn.SetAddElements(p.set, p.vals)
	} else {
		err = t.conn.SetDeleteElements(p.set, p.vals)
	}
	p.vals = p.vals[:0]
	return err
}

// flush sends what is pending and ends the run of its set.
func (p *pendingElements) flush(t *batch) error {
	err := p.send(t)
	p.set, p.def = nil, nil
	return err
}
