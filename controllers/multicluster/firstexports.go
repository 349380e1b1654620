package multicluster

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// firstExports tracks this member's first publication: every ServiceExport that existed when
// the export controller started, each reconciled once. Until then the Lease renewer announces
// it (v1alpha1.AnnotationPublishingSince) and peers hold back new imports (liveness.Starts),
// so that a ClusterSet starting together, or a member joining, creates each import once with
// all its exporters. It gives up after bound, as the peers do.
type firstExports struct {
	reader client.Reader // the manager's cache
	bound  time.Duration
	log    logr.Logger

	mu sync.Mutex
	// since is when the first publication began; zero before the first announcement.
	since time.Time
	// pending is nil until the exports are listed; handled holds what was reconciled before.
	pending, handled map[types.NamespacedName]bool
	// listedKeys are the exports the first publication covers; published says, per export,
	// whether its last reconcile left its record in the broker. Once it ends, records counts
	// the listed ones published (-1: none were listed) and both maps are dropped.
	listedKeys, published map[types.NamespacedName]bool
	records               int
	done                  bool
	finished              chan struct{}
	// renewed is closed when the renewer's first renewal ended: exports publish after it, so
	// that peers see the announcement before any record it covers (awaitFirstRenewal).
	renewed     chan struct{}
	renewedOnce sync.Once
}

func newFirstExports(reader client.Reader, bound time.Duration, log logr.Logger) *firstExports {
	f := &firstExports{reader: reader, bound: bound, log: log, handled: map[types.NamespacedName]bool{}, published: map[types.NamespacedName]bool{},
		finished: make(chan struct{}), renewed: make(chan struct{})}
	if bound <= 0 {
		f.done, f.records = true, -1
		close(f.finished)
	}
	return f
}

// NeedLeaderElection: only the replica that publishes tracks its publication.
func (f *firstExports) NeedLeaderElection() bool { return true }

// Start lists the exports the first publication covers, then waits for them or the bound.
func (f *firstExports) Start(ctx context.Context) error {
	if f.isDone() {
		return nil
	}
	f.announcement() // the bound counts from here at the latest
	list := &mcsv1beta1.ServiceExportList{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, f.bound, true, func(ctx context.Context) (bool, error) {
		if err := f.reader.List(ctx, list); err != nil {
			f.log.Error(err, "listing ServiceExports for the first publication; retrying")
			return false, nil
		}
		return true, nil
	})
	if err == nil {
		f.listed(list.Items)
	}
	select {
	case <-f.finished:
	case <-ctx.Done():
	case <-time.After(time.Until(f.announcedAt().Add(f.bound))):
		f.mu.Lock()
		left := len(f.pending)
		f.mu.Unlock()
		f.log.Info("the first publication is not complete after the wait peers grant it; they create their imports now",
			"wait", f.bound, "exportsLeft", left)
		f.finish()
	}
	return nil
}

// listed starts counting down the exports that exist now.
func (f *firstExports) listed(exports []mcsv1beta1.ServiceExport) {
	f.mu.Lock()
	f.pending, f.listedKeys = map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
	for i := range exports {
		key := client.ObjectKeyFromObject(&exports[i])
		f.listedKeys[key] = true
		if !f.handled[key] {
			f.pending[key] = true
		}
	}
	f.handled = nil
	empty := len(f.pending) == 0
	f.mu.Unlock()
	if empty {
		f.finish()
	}
}

// reconciled records that one export was reconciled to the end: published (its record is in
// the broker), or found invalid or withdrawn.
func (f *firstExports) reconciled(key types.NamespacedName, published bool) {
	f.mu.Lock()
	if f.done {
		f.mu.Unlock()
		return
	}
	f.published[key] = published
	if f.pending == nil {
		f.handled[key] = true
		f.mu.Unlock()
		return
	}
	delete(f.pending, key)
	empty := len(f.pending) == 0
	f.mu.Unlock()
	if empty {
		f.finish()
	}
}

// firstRenewalEnded records that the renewer's first renewal, which carries the announcement,
// succeeded or failed. Failed, the broker is likely unreachable and publishing fails as well, so
// exports go ahead either way: the outage handling reports them.
func (f *firstExports) firstRenewalEnded() {
	f.renewedOnce.Do(func() { close(f.renewed) })
}

// awaitFirstRenewal holds an export's publication back until the announcement was written (or
// tried), the first publication ended, or ctx ended. Otherwise a peer can see the records
// before the announcement, create its imports with this member's exports alone, and write
// each import's status again as the rest arrive.
func (f *firstExports) awaitFirstRenewal(ctx context.Context) {
	select {
	case <-f.renewed:
	case <-f.finished:
	case <-ctx.Done():
	}
}

func (f *firstExports) finish() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	f.done = true
	f.records = -1
	if f.listedKeys != nil {
		f.records = 0
		for key := range f.listedKeys {
			if f.published[key] {
				f.records++
			}
		}
	}
	f.listedKeys, f.published = nil, nil
	close(f.finished)
}

func (f *firstExports) isDone() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// publishedRecords returns, once the first publication ended, how many of the exports it
// covered have their record in the broker; ok is false while it runs or when it covered none
// (it never listed them).
func (f *firstExports) publishedRecords() (n int, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done || f.records < 0 {
		return 0, false
	}
	return f.records, true
}

// announcement returns the Lease annotation's value while the first publication runs; "" once
// it is done.
func (f *firstExports) announcement() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return ""
	}
	if f.since.IsZero() {
		f.since = time.Now()
	}
	return f.since.UTC().Format(time.RFC3339Nano)
}

func (f *firstExports) announcedAt() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.since
}
