package multicluster

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// echoes remembers the resourceVersions this controller's own writes left objects at, so that
// the watch event bringing such a write back (its echo) enqueues nothing: the sync that made
// the write planned it from everything it read, and a sync run for the echo alone reads it all
// again to write nothing. In a bulk start each import's writes (its derived Service, the
// ServiceImport and its status, a slice per exporter) came back as one to three such syncs,
// and a member joining ran two per Service in every peer. An event of anyone else's write
// carries another resourceVersion and passes; a delete always passes. A sync that read a
// cache without its own writes and waits for them (errStaleCache) runs again after
// conflictRetryDelay instead of at the echo.
type echoes struct {
	mu  sync.Mutex
	now func() time.Time
	// shown, when set, is told of every echo: the cache now shows that write (an informer
	// stores an object before it hands out its event), which the sync the echo no longer runs
	// would have found out.
	shown func(kind string, obj client.Object)
	// by object, the resourceVersions of writes whose events have not come yet: a sync writes
	// a ServiceImport twice (created, then its status) before the first event arrives.
	m     map[echoKey][]echo
	swept time.Time
}

type echoKey struct {
	kind string
	key  types.NamespacedName
}

type echo struct {
	resourceVersion string
	at              time.Time
}

func newEchoes(shown func(kind string, obj client.Object)) *echoes {
	return &echoes{now: time.Now, m: map[echoKey][]echo{}, shown: shown}
}

// wrote remembers a write of obj that landed; obj is the object as the API server answered,
// with the resourceVersion the write gave it.
func (e *echoes) wrote(kind string, obj client.Object) {
	if e == nil || obj.GetResourceVersion() == "" {
		return
	}
	now := e.now()
	k := echoKey{kind: kind, key: client.ObjectKeyFromObject(obj)}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sweep(now)
	e.m[k] = append(e.m[k], echo{resourceVersion: obj.GetResourceVersion(), at: now})
}

// isEcho says whether obj, as a watch event shows it, is one of the remembered writes, and
// forgets that write and any earlier ones of the object (their events, if any, are past).
func (e *echoes) isEcho(kind string, obj client.Object) bool {
	if e == nil {
		return false
	}
	if !e.forgetEcho(kind, obj) {
		return false
	}
	if e.shown != nil {
		e.shown(kind, obj)
	}
	return true
}

func (e *echoes) forgetEcho(kind string, obj client.Object) bool {
	k := echoKey{kind: kind, key: client.ObjectKeyFromObject(obj)}
	e.mu.Lock()
	defer e.mu.Unlock()
	writes := e.m[k]
	i := slices.IndexFunc(writes, func(w echo) bool { return w.resourceVersion == obj.GetResourceVersion() })
	if i < 0 {
		return false
	}
	if rest := writes[i+1:]; len(rest) > 0 {
		e.m[k] = slices.Clone(rest)
	} else {
		delete(e.m, k)
	}
	return true
}

// forget drops what is remembered of an object that was deleted.
func (e *echoes) forget(kind string, obj client.Object) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, echoKey{kind: kind, key: client.ObjectKeyFromObject(obj)})
}

// sweep drops, at most once per writtenExpiry, the writes whose events never came (a watch
// that was re-established with a list shows only the latest state).
func (e *echoes) sweep(now time.Time) {
	if now.Sub(e.swept) < writtenExpiry {
		return
	}
	e.swept = now
	for k, writes := range e.m {
		writes = slices.DeleteFunc(writes, func(w echo) bool { return now.Sub(w.at) > writtenExpiry })
		if len(writes) == 0 {
			delete(e.m, k)
		} else {
			e.m[k] = writes
		}
	}
}

// notEchoes is the predicate that drops the echoes of kind's writes.
func (e *echoes) notEchoes(kind string) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(ev event.CreateEvent) bool { return !e.isEcho(kind, ev.Object) },
		UpdateFunc: func(ev event.UpdateEvent) bool { return !e.isEcho(kind, ev.ObjectNew) },
		DeleteFunc: func(ev event.DeleteEvent) bool {
			e.forget(kind, ev.Object)
			return true
		},
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
}
