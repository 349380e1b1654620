package ruleset

import (
	"iter"
	"slices"
)

// Elements is a run of element operations, all with the Op's verb, spelled out only while a
// backend reads them. A full sync writes hundreds of thousands of map elements; held as one
// Op each (with their Elements and Values, about 280 bytes an element) they were most of the
// agent's memory at its largest moment, beside the netlink messages they become. A run keeps
// what it renders them from instead, and Each renders them again on every read, so a run must
// render from values nobody changes afterwards.
type Elements struct {
	// Count is how many elements Each yields.
	Count int
	// Each yields the elements in order. An element it yields, with its slices, is valid only
	// until yield returns (Each may reuse it for the next): a reader that keeps one keeps its
	// Clone.
	Each func(yield func(*Element) bool)
}

func (*Elements) isObject() {}

// All yields ops in order with every run spelled out, one element at a time: an element of a
// run is valid until the next step of the loop (see Elements.Each).
func All(ops []Op) iter.Seq[Op] {
	return func(yield func(Op) bool) {
		for _, o := range ops {
			run, ok := o.Obj.(*Elements)
			if !ok {
				if !yield(o) {
					return
				}
				continue
			}
			stopped := false
			run.Each(func(e *Element) bool {
				stopped = !yield(Op{Verb: o.Verb, Obj: e})
				return !stopped
			})
			if stopped {
				return
			}
		}
	}
}

// Expand returns ops with every run spelled out, for readers that keep every operation anyway.
func Expand(ops []Op) []Op {
	out := make([]Op, 0, Count(ops))
	for o := range All(ops) {
		if e, ok := o.Obj.(*Element); ok {
			o.Obj = e.Clone()
		}
		out = append(out, o)
	}
	return out
}

// Clone is a copy of e that shares none of its slices or its verdict.
func (e *Element) Clone() *Element {
	c := *e
	c.Key = slices.Clone(e.Key)
	c.Value = slices.Clone(e.Value)
	if e.Verdict != nil {
		v := *e.Verdict
		c.Verdict = &v
	}
	return &c
}

// Count is how many operations ops stand for, a run counting as its elements.
func Count(ops []Op) int {
	n := 0
	for _, o := range ops {
		if run, ok := o.Obj.(*Elements); ok {
			n += run.Count
		} else {
			n++
		}
	}
	return n
}
