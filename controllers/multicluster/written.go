package multicluster

import (
	"errors"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/controllers/slicewrite"
)

// errStaleCache says a reconcile read a cache that does not hold its own last writes yet: it
// writes nothing and runs again when the cache catches up (the written slices' events enqueue
// it), or after conflictRetryDelay.
var errStaleCache = errors.New("the cache does not hold this controller's last writes yet")

// writtenExpiry bounds how long a remembered write can hold a reconcile back: far longer than a
// watch takes to deliver it, even when the API server came back from an outage and the watch
// is re-established with a back-off.
const writtenExpiry = time.Minute

// writtenSlices remembers, per owner (an exported Service, a ServiceImport), the slice writes
// that landed and are not in the cache yet (and, in objects, an export's record and status
// writes), so that a reconcile reading that cache holds back instead of writing from it again:
// an update from the older copy is refused with 409, a create of a slice it already created
// with AlreadyExists, and either is retried. This is what upstream's EndpointSlice controller
// does with its generation tracker (kubernetes PR 99345).
// After the broker came back from an outage a member's broker watch resumes seconds later, and
// a Service's export reconciled meanwhile (its status write alone enqueues it again) sent an
// update every 200 ms that the broker refused: 63 to 283 refused writes for 10 changes.
type writtenSlices struct {
	mu  sync.Mutex
	now func() time.Time
	// by owner, by slice name: what the cache shows while it is behind.
	m map[types.NamespacedName]map[string]writtenSlice
	// objects: the last write that landed of one object per kind and key (an export's broker
	// record, a ServiceExport's status). An object created moments ago and missing from the
	// cache would be created again (AlreadyExists), an updated one updated again from its old
	// resourceVersion (409).
	objects map[writtenKey]writtenSlice
	swept   time.Time // when objects was last cleared of expired writes
}

// writtenKey names one object remembered in writtenSlices.objects.
type writtenKey struct {
	kind string
	key  types.NamespacedName
}

// The kinds of single objects writtenSlices remembers.
const (
	writtenRecord       = "record"
	writtenExportStatus = "serviceexport-status"
	// An import's ServiceImport (spec and status) and its derived Service, by the import's key.
	writtenImport  = "serviceimport"
	writtenDerived = "derived-service"
)

// writtenSlice is what the writes of one object that landed leave the cache behind on: it is
// behind while it lacks an object created, still shows a resourceVersion an update replaced,
// or still holds an object deleted. Writes one sync makes to the same object in turn (a
// ServiceImport created, then its status written) add up.
type writtenSlice struct {
	created  bool
	replaced []string // resourceVersions updates were made from
	deleted  bool
	uid      types.UID // of the object deleted
	at       time.Time
}

// newWrite is what one write that landed leaves behind: op, the resourceVersion an update
// replaced, the UID a delete removed.
func newWrite(op slicewrite.Op, replaced string, uid types.UID, at time.Time) writtenSlice {
	rec := writtenSlice{at: at}
	switch op {
	case slicewrite.Create:
		rec.created = true
	case slicewrite.Update:
		rec.replaced = []string{replaced}
	case slicewrite.Delete:
		rec.deleted, rec.uid = true, uid
	}
	return rec
}

// after adds an earlier write of the same object that the cache had not shown when this one
// was made (a sync holds back on a cache behind its writes, so such a write is its own).
func (rec writtenSlice) after(earlier writtenSlice, now time.Time) writtenSlice {
	if now.Sub(earlier.at) > writtenExpiry {
		return rec
	}
	rec.created = rec.created || earlier.created
	rec.replaced = append(rec.replaced, earlier.replaced...)
	if !rec.deleted {
		rec.deleted, rec.uid = earlier.deleted, earlier.uid
	}
	return rec
}

func newWrittenSlices() *writtenSlices {
	return &writtenSlices{now: time.Now, m: map[types.NamespacedName]map[string]writtenSlice{},
		objects: map[writtenKey]writtenSlice{}}
}

// apply writes changes through write, remembering for owner every write that landed. The
// resourceVersions the updates start from are taken before the writes, which replace them.
func (w *writtenSlices) apply(owner types.NamespacedName, changes sliceplan.Changes, write func(sliceplan.Changes, slicewrite.Observer[*discoveryv1.EndpointSlice]) error) error {
	if w == nil {
		return write(changes, nil)
	}
	from := make(map[string]string, len(changes.Update))
	for _, s := range changes.Update {
		from[s.Name] = s.ResourceVersion
	}
	uids := make(map[string]types.UID, len(changes.Delete))
	for _, s := range changes.Delete {
		uids[s.Name] = s.UID
	}
	return write(changes, func(op slicewrite.Op, s *discoveryv1.EndpointSlice, _ time.Duration, err error) {
		if err != nil {
			return
		}
		now := w.now()
		rec := newWrite(op, from[s.Name], uids[s.Name], now)
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.m[owner] == nil {
			w.m[owner] = map[string]writtenSlice{}
		}
		if prev, ok := w.m[owner][s.Name]; ok {
			// A delete and a create of the same name (a new address type): the cache is behind
			// until it shows the new slice.
			rec = rec.after(prev, now)
		}
		w.m[owner][s.Name] = rec
	})
}

// behind reports whether cached, owner's slices as a cache shows them, lacks one of the
// writes remembered for owner. Writes the cache shows are forgotten.
func (w *writtenSlices) behind(owner types.NamespacedName, cached []discoveryv1.EndpointSlice) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	writes := w.m[owner]
	if len(writes) == 0 {
		return false
	}
	have := make(map[string]*discoveryv1.EndpointSlice, len(cached))
	for i := range cached {
		have[cached[i].Name] = &cached[i]
	}
	now := w.now()
	behind := false
	for name, rec := range writes {
		var shown metav1.Object
		if s, ok := have[name]; ok {
			shown = s
		}
		if !rec.shownLagging(shown, now) {
			delete(writes, name)
			continue
		}
		behind = true
	}
	if len(writes) == 0 {
		delete(w.m, owner)
	}
	return behind
}

// shownLagging says whether shown, the object as the cache shows it (nil: absent), is from
// before this write, while the write is young enough to be waited for.
func (rec writtenSlice) shownLagging(shown metav1.Object, now time.Time) bool {
	switch {
	case now.Sub(rec.at) > writtenExpiry:
		return false
	case shown == nil:
		return rec.created
	case rec.deleted && shown.GetUID() == rec.uid:
		return true
	}
	return slices.Contains(rec.replaced, shown.GetResourceVersion())
}

// objectWritten remembers a write of one object that landed: op, the resourceVersion an
// update replaced, the UID a delete removed; added to the object's earlier writes the cache
// has not shown yet.
func (w *writtenSlices) objectWritten(kind string, key types.NamespacedName, op slicewrite.Op, replaced string, uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if now.Sub(w.swept) > writtenExpiry {
		// An object nobody reconciles again (a deleted export) is never looked up: drop what
		// has expired, once per expiry.
		for k, rec := range w.objects {
			if now.Sub(rec.at) > writtenExpiry {
				delete(w.objects, k)
			}
		}
		w.swept = now
	}
	k := writtenKey{kind, key}
	rec := newWrite(op, replaced, uid, now)
	if prev, ok := w.objects[k]; ok {
		rec = rec.after(prev, now)
	}
	w.objects[k] = rec
}

// objectBehind reports whether shown, the object as the cache shows it (nil: absent), lacks
// the last write remembered for it; a write the cache shows is forgotten.
func (w *writtenSlices) objectBehind(kind string, key types.NamespacedName, shown metav1.Object) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := writtenKey{kind, key}
	rec, ok := w.objects[k]
	if !ok {
		return false
	}
	if rec.shownLagging(shown, w.now()) {
		return true
	}
	delete(w.objects, k)
	return false
}

// recordBehind is objectBehind for an export's broker record, nil when the cache has none.
func (w *writtenSlices) recordBehind(owner types.NamespacedName, cached *v1alpha1.ServiceExportRecord) bool {
	if cached == nil {
		return w.objectBehind(writtenRecord, owner, nil)
	}
	return w.objectBehind(writtenRecord, owner, cached)
}
