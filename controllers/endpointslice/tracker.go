package endpointslice

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deletedGeneration marks a slice this controller deleted and still expects to vanish from the cache.
const deletedGeneration int64 = -1

// sliceTracker remembers, per Service, the generation of every EndpointSlice this controller wrote
// until the informer cache has caught up with it. A sync that reads a cache older than its own last
// writes would plan from stale slices and create duplicates (kubernetes/kubernetes 92928); the
// reconciler asks Stale first and retries later instead.
type sliceTracker struct {
	mu sync.Mutex
	// expected maps a Service to the slices it wrote: slice UID to generation (or deletedGeneration).
	expected map[types.NamespacedName]map[types.UID]int64
}

func newSliceTracker() *sliceTracker {
	return &sliceTracker{expected: map[types.NamespacedName]map[types.UID]int64{}}
}

// Wrote records a create or update this controller made.
func (t *sliceTracker) Wrote(service types.NamespacedName, slice *discoveryv1.EndpointSlice) {
	t.set(service, slice.UID, slice.Generation)
}

// Deleted records a delete this controller made.
func (t *sliceTracker) Deleted(service types.NamespacedName, slice *discoveryv1.EndpointSlice) {
	t.set(service, slice.UID, deletedGeneration)
}

func (t *sliceTracker) set(service types.NamespacedName, uid types.UID, generation int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slices := t.expected[service]
	if slices == nil {
		slices = map[types.UID]int64{}
		t.expected[service] = slices
	}
	slices[uid] = generation
}

// Stale reports whether cached, the slices the cache holds for service, is older than what this
// controller wrote. Deletions the cache has caught up with are dropped; written generations are
// kept until the slice goes, so IsOwnWrite can still recognise the echo of a write whose event
// arrives after a sync already saw it in the cache.
func (t *sliceTracker) Stale(service types.NamespacedName, cached []*discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	expected := t.expected[service]
	if len(expected) == 0 {
		return false
	}
	seen := make(map[types.UID]int64, len(cached))
	for _, s := range cached {
		seen[s.UID] = s.Generation
	}
	stale := false
	for uid, want := range expected {
		got, inCache := seen[uid]
		switch {
		case want == deletedGeneration && inCache:
			stale = true
		case want == deletedGeneration:
			delete(expected, uid)
		case !inCache || got < want:
			stale = true
		}
	}
	if len(expected) == 0 {
		delete(t.expected, service)
	}
	return stale
}

// IsOwnWrite reports whether an observed slice is exactly what this controller last wrote, so the
// event it caused need not trigger another sync.
func (t *sliceTracker) IsOwnWrite(service types.NamespacedName, slice *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	want, ok := t.expected[service][slice.UID]
	return ok && want == slice.Generation
}

// SliceGone forgets a slice that disappeared from the cache, whoever deleted it, so a slice removed
// behind this controller's back never leaves its Service stale forever.
func (t *sliceTracker) SliceGone(service types.NamespacedName, uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if slices := t.expected[service]; slices != nil {
		delete(slices, uid)
		if len(slices) == 0 {
			delete(t.expected, service)
		}
	}
}

// ForgetService drops everything known about a deleted Service.
func (t *sliceTracker) ForgetService(service types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.expected, service)
}
