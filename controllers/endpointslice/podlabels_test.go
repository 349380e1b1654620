package endpointslice

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestPodLabelsAreInternedAndMatchLikeAMap(t *testing.T) {
	long := strings.Repeat("k", 300) // a length past one varint byte
	m := map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5", "empty": "", long + "/x": strings.Repeat("v", 63)}
	l := labelsOf(m)
	if l != labelsOf(map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5", "empty": "", long + "/x": strings.Repeat("v", 63)}) {
		t.Fatalf("equal labels are not one interned value")
	}
	if l == labelsOf(map[string]string{"app": "web"}) || labelsOf(nil) != labelsOf(map[string]string{}) {
		t.Fatalf("label sets compare wrongly")
	}
	if got := l.Map(); !reflect.DeepEqual(got, m) {
		t.Fatalf("Map = %v", got)
	}
	if labelsOf(nil).Map() != nil || labelsOf(nil).Has("app") {
		t.Fatalf("no labels has some")
	}
	for _, key := range []string{"app", "empty", "pod-template-hash", long + "/x", "absent", "", "zzz", "a"} {
		want, wantOK := m[key]
		if got, ok := l.Lookup(key); got != want || ok != wantOK || l.Has(key) != wantOK || l.Get(key) != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", key, got, ok, want, wantOK)
		}
	}
	for _, expr := range []string{"app=web", "app!=web", "empty", "!empty", "empty=", "absent", "app in (api, web), !absent"} {
		sel, err := labels.Parse(expr)
		if err != nil {
			t.Fatal(err)
		}
		if sel.Matches(l) != sel.Matches(labels.Set(m)) {
			t.Errorf("%q matches the interned labels otherwise than the map", expr)
		}
	}
}
