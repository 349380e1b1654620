package endpointslice

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func slice(uid string, generation int64) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Generation: generation}}
}

func TestTrackerStaleness(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	cases := []struct {
		name   string
		record func(*sliceTracker)
		cached []*discoveryv1.EndpointSlice
		stale  bool
	}{
		{"nothing written", func(*sliceTracker) {}, nil, false},
		{"created, not yet in cache", func(tr *sliceTracker) { tr.Wrote(svc, slice("a", 1)) }, nil, true},
		{"created and seen", func(tr *sliceTracker) { tr.Wrote(svc, slice("a", 1)) }, []*discoveryv1.EndpointSlice{slice("a", 1)}, false},
		{"updated, cache has the older generation", func(tr *sliceTracker) { tr.Wrote(svc, slice("a", 3)) },
			[]*discoveryv1.EndpointSlice{slice("a", 2)}, true},
		{"updated, cache newer than our write", func(tr *sliceTracker) { tr.Wrote(svc, slice("a", 3)) },
			[]*discoveryv1.EndpointSlice{slice("a", 4)}, false},
		{"deleted, still cached", func(tr *sliceTracker) { tr.Deleted(svc, slice("a", 3)) },
			[]*discoveryv1.EndpointSlice{slice("a", 3)}, true},
		{"deleted and gone", func(tr *sliceTracker) { tr.Deleted(svc, slice("a", 3)) }, nil, false},
		{"another Service's writes do not count", func(tr *sliceTracker) { tr.Wrote(other, slice("b", 1)) }, nil, false},
		{"slice removed behind our back", func(tr *sliceTracker) {
			tr.Wrote(svc, slice("a", 1))
			tr.SliceGone(svc, "a")
		}, nil, false},
		{"service forgotten", func(tr *sliceTracker) {
			tr.Wrote(svc, slice("a", 1))
			tr.ForgetService(svc)
		}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := newSliceTracker()
			tc.record(tr)
			if got := tr.Stale(svc, tc.cached); got != tc.stale {
				t.Fatalf("Stale = %v, want %v", got, tc.stale)
			}
		})
	}
}

func TestTrackerKeepsWritesUntilTheSliceGoes(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	tr := newSliceTracker()
	tr.Wrote(svc, slice("a", 2))
	tr.Deleted(svc, slice("b", 1))
	if tr.Stale(svc, []*discoveryv1.EndpointSlice{slice("a", 2)}) {
		t.Fatal("cache has caught up, must not be stale")
	}
	// The update event of our own write may be handled after a sync saw it in the cache.
	if !tr.IsOwnWrite(svc, slice("a", 2)) || tr.IsOwnWrite(svc, slice("a", 3)) {
		t.Fatal("IsOwnWrite must match exactly the generation written, also after the cache caught up")
	}
	if _, kept := tr.expected[svc]["b"]; kept {
		t.Fatal("a deletion the cache has seen must be forgotten")
	}
	tr.SliceGone(svc, "a")
	if len(tr.expected) != 0 {
		t.Fatalf("a slice that went must be forgotten, have %v", tr.expected)
	}
}
