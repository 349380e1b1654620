package apiclient

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/restmapper"
)

// countingMapper counts the RESTMapping questions that reach it; served says which kinds exist.
type countingMapper struct {
	meta.RESTMapper
	asked  int
	served map[schema.GroupKind]bool
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	if !c.served[gk] {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
	}
	return c.RESTMapper.RESTMapping(gk, versions...)
}

var records = schema.GroupKind{Group: "fleetslice.io", Kind: "ServiceExportRecord"}

func TestRememberMappingsAsksOncePerKindAndVersions(t *testing.T) {
	inner := &countingMapper{RESTMapper: discoveryMapper(2, 2), served: map[schema.GroupKind]bool{records: true}}
	m := RememberMappings(inner)
	for range 3 {
		got, err := m.RESTMapping(records, "v1alpha1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Resource.Resource != "serviceexportrecords" || got.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("mapping %+v", got)
		}
	}
	if inner.asked != 1 {
		t.Fatalf("the mapper behind was asked %d times for one kind and version, want 1", inner.asked)
	}
	if _, err := m.RESTMapping(records); err != nil {
		t.Fatal(err)
	}
	if inner.asked != 2 {
		t.Fatalf("a question with other versions was answered from memory (asked %d times, want 2)", inner.asked)
	}
}

func TestRememberMappingsAsksAgainAfterAnError(t *testing.T) {
	inner := &countingMapper{RESTMapper: discoveryMapper(2, 2), served: map[schema.GroupKind]bool{}}
	m := RememberMappings(inner)
	if _, err := m.RESTMapping(records, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("want the mapper's no-match error, got %v", err)
	}
	inner.served[records] = true // the CRD is installed now
	if _, err := m.RESTMapping(records, "v1alpha1"); err != nil {
		t.Fatalf("a kind served after a failed lookup stays unknown: %v", err)
	}
	if inner.asked != 2 {
		t.Fatalf("asked %d times, want 2 (errors are not remembered)", inner.asked)
	}
}

func TestRememberMappingsHandsOutCopies(t *testing.T) {
	m := RememberMappings(&countingMapper{RESTMapper: discoveryMapper(2, 2), served: map[schema.GroupKind]bool{records: true}})
	first, err := m.RESTMapping(records, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	first.Resource.Resource = "changed by a caller"
	second, err := m.RESTMapping(records, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	second.Resource.Resource = "changed by another"
	third, err := m.RESTMapping(records, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	if third.Resource.Resource != "serviceexportrecords" {
		t.Fatalf("a caller's change reached a later answer: %q", third.Resource.Resource)
	}
}

// discoveryMapper is the mapper the dynamic one builds from an API server's discovery: groups
// API groups of kinds kinds each, plus fleetslice.io's records.
func discoveryMapper(groups, kinds int) meta.RESTMapper {
	all := []*restmapper.APIGroupResources{apiGroup("fleetslice.io", "v1alpha1", "ServiceExportRecord")}
	for g := range groups {
		names := make([]string, kinds)
		for k := range names {
			names[k] = fmt.Sprintf("Kind%d", k)
		}
		all = append(all, apiGroup(fmt.Sprintf("group%d.example.com", g), "v1", names...))
	}
	return restmapper.NewDiscoveryRESTMapper(all)
}

func apiGroup(name, version string, kinds ...string) *restmapper.APIGroupResources {
	gv := metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + version, Version: version}
	group := &restmapper.APIGroupResources{
		Group:              metav1.APIGroup{Name: name, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv},
		VersionedResources: map[string][]metav1.APIResource{},
	}
	for _, kind := range kinds {
		resource := metav1.APIResource{Name: plural(kind), Kind: kind, Namespaced: true}
		group.VersionedResources[version] = append(group.VersionedResources[version], resource)
	}
	return group
}

func plural(kind string) string {
	lower := []byte(kind)
	for i, c := range lower {
		if c >= 'A' && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	return string(lower) + "s"
}

// BenchmarkRESTMapping asks for one kind's mapping the way every client request and cache List
// does, in a mapper about the size of an API server's discovery (kube-apiserver 1.37 serves some
// 25 groups).
func BenchmarkRESTMapping(b *testing.B) {
	for _, c := range []struct {
		name   string
		mapper meta.RESTMapper
	}{
		{"discovery", discoveryMapper(25, 6)},
		{"remembered", RememberMappings(discoveryMapper(25, 6))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.mapper.RESTMapping(records, "v1alpha1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
