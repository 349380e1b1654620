package endpointslice

import (
	"encoding/binary"
	"maps"
	"slices"
	"unique"
)

// podLabels are a cached Pod's labels, interned: the Pods of one template (10,000 of one
// Deployment) share one copy, and two label sets are equal when their handles are. A map of two
// labels took 336 bytes for every Pod. They are a labels.Labels, so selectors match them
// directly. The zero value has no labels.
//
// The interned value is the labels sorted by key, each key and value prefixed by its length.
type podLabels struct{ h unique.Handle[string] }

func labelsOf(m map[string]string) podLabels {
	if len(m) == 0 {
		return podLabels{}
	}
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(m[k])))
		b = append(b, m[k]...)
	}
	return podLabels{unique.Make(string(b))}
}

// each calls f with every label in key order until it returns false.
func (l podLabels) each(f func(k, v string) bool) {
	if l.h == (unique.Handle[string]{}) {
		return
	}
	s := l.h.Value()
	next := func() string {
		var n, shift int
		for {
			c := s[0]
			s = s[1:]
			n |= int(c&0x7f) << shift
			if c < 0x80 {
				break
			}
			shift += 7
		}
		v := s[:n]
		s = s[n:]
		return v
	}
	for len(s) > 0 {
		k := next()
		if !f(k, next()) {
			return
		}
	}
}

// Lookup returns the value of a label and whether the Pod has it.
func (l podLabels) Lookup(key string) (value string, found bool) {
	l.each(func(k, v string) bool {
		if k == key {
			value, found = v, true
		}
		return !found && k < key
	})
	return value, found
}

// Has reports whether the Pod has the label (labels.Labels).
func (l podLabels) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

// Get returns the label's value, empty when the Pod does not have it (labels.Labels).
func (l podLabels) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}

// Map returns the labels as a new map; nil without labels.
func (l podLabels) Map() map[string]string {
	var m map[string]string
	l.each(func(k, v string) bool {
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
		return true
	})
	return m
}
