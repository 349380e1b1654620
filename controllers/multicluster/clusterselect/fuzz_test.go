package clusterselect

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// source turns fuzz bytes into choices, answering zero past the end.
type source struct {
	data []byte
	next int
}

func (s *source) pick(n int) int {
	if s.next >= len(s.data) {
		return 0
	}
	b := s.data[s.next]
	s.next++
	return int(b) % n
}

// Small domains, so that selectors and properties meet.
var (
	keys   = []string{ClusterIDProperty, "region.topology.k8s.io", "zone.example.com"}
	values = []string{"a", "b", v1alpha1.SameAsImporter}
	ops    = []v1alpha1.PropertySelectorOperator{"In", "NotIn", "Exists", "DoesNotExist"}
)

func (s *source) selectors() []Selector {
	out := make([]Selector, 1+s.pick(4))
	for i := range out {
		ps := &v1alpha1.PropertySelector{}
		for range s.pick(3) {
			if ps.MatchProperties == nil {
				ps.MatchProperties = map[string]string{}
			}
			ps.MatchProperties[keys[s.pick(len(keys))]] = values[s.pick(len(values))]
		}
		for range s.pick(3) {
			r := v1alpha1.PropertySelectorRequirement{Key: keys[s.pick(len(keys))], Operator: ops[s.pick(len(ops))]}
			if r.Operator == "In" || r.Operator == "NotIn" {
				for range 1 + s.pick(2) {
					r.Values = append(r.Values, values[s.pick(len(values))])
				}
			}
			ps.MatchExpressions = append(ps.MatchExpressions, r)
		}
		if len(ps.MatchProperties) == 0 && len(ps.MatchExpressions) == 0 {
			ps.MatchExpressions = []v1alpha1.PropertySelectorRequirement{{Key: keys[1], Operator: "Exists"}}
		}
		out[i].PropertySelector = ps
	}
	return out
}

func (s *source) members() []Member {
	out := make([]Member, 1+s.pick(6))
	for i := range out {
		out[i] = Member{Name: fmt.Sprintf("c%d", i), Properties: map[string]string{}}
		for _, k := range keys[1:] {
			if v := s.pick(3); v < 2 {
				out[i].Properties[k] = values[v]
			}
		}
	}
	return out
}

// FuzzEvaluate checks Evaluate's promises on random selectors and fleets: one result per
// selector; ids ascending, unique, exporters only, and never a member lacking a compared
// property; nothing when the importer lacks a property a placeholder needs; the same for any
// exporter order; and selectors survive their annotation unchanged.
func FuzzEvaluate(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{3, 1, 1, 2, 0, 1, 1, 0, 2, 4, 0, 1, 2, 1, 0, 2, 1})
	f.Add([]byte{2, 2, 1, 2, 2, 1, 1, 0, 1, 1, 5, 0, 0, 1, 1, 2, 0, 2, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &source{data: data}
		sel := s.selectors()
		members := s.members()
		importer := members[s.pick(len(members))]
		if err := Validate(sel); err != nil {
			t.Fatalf("generated selectors refused: %v", err)
		}
		back, err := Parse(Format(sel))
		if err != nil || !Equal(back, sel) || Validate(back) != nil {
			t.Fatalf("annotation round trip: %v\n%s\n%s", err, Format(sel), Format(back))
		}
		got := Evaluate(sel, importer, members)
		if len(got) != len(sel) {
			t.Fatalf("%d results for %d selectors", len(got), len(sel))
		}
		missing := map[string]bool{}
		for _, m := range Missing(sel, members) {
			missing[m.Cluster] = true
		}
		for i, r := range got {
			if !slices.IsSorted(r.Clusters) || len(slices.Compact(slices.Clone(r.Clusters))) != len(r.Clusters) {
				t.Fatalf("result %d not ascending and unique: %v", i, r.Clusters)
			}
			for _, c := range r.Clusters {
				if missing[c] || !slices.ContainsFunc(members, func(m Member) bool { return m.Name == c }) {
					t.Fatalf("result %d holds %s, incomplete or no exporter", i, c)
				}
			}
			if needsMissingValue(sel[i], importer) && len(r.Clusters) > 0 {
				t.Fatalf("selector %d needs a property %s lacks, yet selects %v", i, importer.Name, r.Clusters)
			}
		}
		reversed := slices.Clone(members)
		slices.Reverse(reversed)
		if again := Evaluate(sel, importer, reversed); !reflect.DeepEqual(again, got) {
			t.Fatalf("exporter order changed the results: %v, then %v", got, again)
		}
	})
}

func needsMissingValue(s Selector, importer Member) bool {
	ps := s.PropertySelector
	for k, v := range ps.MatchProperties {
		if _, ok := importer.value(k); v == v1alpha1.SameAsImporter && !ok {
			return true
		}
	}
	for _, r := range ps.MatchExpressions {
		_, ok := importer.value(r.Key)
		if !ok && slices.Contains(r.Values, v1alpha1.SameAsImporter) {
			return true
		}
	}
	return false
}

// BenchmarkEvaluate50 evaluates the KEP's first story for one importer of a 50-cluster fleet.
func BenchmarkEvaluate50(b *testing.B) {
	sel, err := Parse(story1)
	if err != nil {
		b.Fatal(err)
	}
	members := make([]Member, 50)
	for i := range members {
		members[i] = Member{Name: fmt.Sprintf("c%02d", i), Properties: map[string]string{
			region: fmt.Sprintf("r%d", i%5), "continent.topology.k8s.io": fmt.Sprintf("k%d", i%2)}}
	}
	for b.Loop() {
		Evaluate(sel, members[7], members)
	}
}
