package clusterselect

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// ClusterIDProperty is the ClusterProperty that holds a member's cluster id (KEP-2149). A
// member's id is its value whatever the member publishes, so selecting on it always works.
const ClusterIDProperty = "cluster.clusterset.k8s.io"

// Member is a cluster as selection sees it: its id and its ClusterProperties.
type Member struct {
	Name       string
	Properties map[string]string
}

func (m Member) value(key string) (string, bool) {
	if key == ClusterIDProperty && m.Name != "" {
		return m.Name, true
	}
	v, ok := m.Properties[key]
	return v, ok
}

// Result is one selector's clusters for one importer.
type Result = v1alpha1.ClusterSelectorResult

// UsedKeys lists, ascending, the properties whose values some selector compares: the keys of
// matchProperties and of In and NotIn requirements. A member without one of them is in no result.
func UsedKeys(selectors []Selector) []string {
	set := map[string]bool{}
	for _, s := range selectors {
		if s.PropertySelector == nil {
			continue
		}
		for k := range s.PropertySelector.MatchProperties {
			set[k] = true
		}
		for _, r := range s.PropertySelector.MatchExpressions {
			if r.Operator == v1alpha1.PropertySelectorOpIn || r.Operator == v1alpha1.PropertySelectorOpNotIn {
				set[r.Key] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// MissingProperties names a member and the used properties it lacks.
type MissingProperties struct {
	Cluster string
	Keys    []string
}

// Missing lists, by cluster ascending, the members that lack a property the selectors compare.
func Missing(selectors []Selector, members []Member) []MissingProperties {
	used := UsedKeys(selectors)
	var out []MissingProperties
	for _, m := range members {
		var keys []string
		for _, k := range used {
			if _, ok := m.value(k); !ok {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			out = append(out, MissingProperties{Cluster: m.Name, Keys: keys})
		}
	}
	slices.SortFunc(out, func(a, b MissingProperties) int { return cmp.Compare(a.Cluster, b.Cluster) })
	return out
}

// Evaluate returns, for each selector in order, the exporters it selects for importer, ids
// ascending. An empty result means the selector selects no cluster.
func Evaluate(selectors []Selector, importer Member, exporters []Member) []Result {
	if len(selectors) == 0 {
		return nil
	}
	used := UsedKeys(selectors)
	var candidates []string
	byName := map[string]Member{}
	for _, e := range exporters {
		if complete(e, used) {
			candidates = append(candidates, e.Name)
			byName[e.Name] = e
		}
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	out := make([]Result, len(selectors))
	for i, s := range selectors {
		reqs, ok := prepare(s, importer)
		if !ok {
			continue
		}
		for _, name := range candidates {
			if matches(reqs, byName[name]) {
				out[i].Clusters = append(out[i].Clusters, name)
			}
		}
	}
	return out
}

func complete(m Member, used []string) bool {
	for _, k := range used {
		if _, ok := m.value(k); !ok {
			return false
		}
	}
	return true
}

// requirement is a requirement with the importer's values filled in.
type requirement struct {
	key    string
	op     v1alpha1.PropertySelectorOperator
	values []string
}

// prepare resolves "@SameAsImporter@" with importer's values; ok is false when the importer
// lacks one of them, and the selector then matches no cluster.
func prepare(s Selector, importer Member) ([]requirement, bool) {
	ps := s.PropertySelector
	if ps == nil {
		return nil, false
	}
	var out []requirement
	resolve := func(key, v string) (string, bool) {
		if v != v1alpha1.SameAsImporter {
			return v, true
		}
		return importer.value(key)
	}
	for _, k := range slices.Sorted(maps.Keys(ps.MatchProperties)) {
		v, ok := resolve(k, ps.MatchProperties[k])
		if !ok {
			return nil, false
		}
		out = append(out, requirement{key: k, op: v1alpha1.PropertySelectorOpIn, values: []string{v}})
	}
	for _, r := range ps.MatchExpressions {
		req := requirement{key: r.Key, op: r.Operator}
		for _, v := range r.Values {
			v, ok := resolve(r.Key, v)
			if !ok {
				return nil, false
			}
			req.values = append(req.values, v)
		}
		out = append(out, req)
	}
	return out, len(out) > 0
}

// matches applies the requirements as metav1.LabelSelector does.
func matches(reqs []requirement, m Member) bool {
	for _, r := range reqs {
		v, has := m.value(r.key)
		var ok bool
		switch r.op {
		case v1alpha1.PropertySelectorOpIn:
			ok = has && slices.Contains(r.values, v)
		case v1alpha1.PropertySelectorOpNotIn:
			ok = !has || !slices.Contains(r.values, v)
		case v1alpha1.PropertySelectorOpExists:
			ok = has
		case v1alpha1.PropertySelectorOpDoesNotExist:
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// FormatResults writes results as the annotation value (never empty: a selector that selects
// nothing is an empty object, so the list keeps its order and length).
func FormatResults(results []Result) string {
	if results == nil {
		results = []Result{}
	}
	b, err := json.Marshal(results)
	if err != nil {
		return ""
	}
	return string(b)
}

// ParseResults reads the results annotation.
func ParseResults(value string) ([]Result, error) {
	var out []Result
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("%s: %w", v1alpha1.AnnotationClusterSelectorResults, err)
	}
	return out, nil
}

// FormatProperties writes a member's ClusterProperties as its Lease annotation (JSON, keys
// sorted by encoding/json).
func FormatProperties(props map[string]string) string {
	if props == nil {
		props = map[string]string{}
	}
	b, err := json.Marshal(props)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// ParseProperties reads a peer's Lease annotation; ok is false when it is absent or unreadable
// (a member of an older version), which then has no properties.
func ParseProperties(value string) (map[string]string, bool) {
	if value == "" {
		return nil, false
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, false
	}
	return out, true
}
