package dataplane

import (
	"context"
	"errors"
)

// ErrNeedsEverything is returned by SyncChanges when the Syncer cannot work from changes alone:
// before its first sync, after a failed one, and while two Services contend for one address and
// port (which one wins depends on every contender). Nothing was written; the caller then calls
// Sync with every Service.
var ErrNeedsEverything = errors.New("dataplane: this sync needs every Service")

// SyncChanges is an incremental Sync for a caller that knows what changed since its last sync:
// changed holds the Services added or changed, removed the keys ("namespace/name") of those gone.
// Every other Service is taken as it was, so the sync costs what the changes cost, however many
// Services the table holds; Sync instead compares every Service it is given with what it wrote.
// Passing a Service that did not change is harmless.
func (s *Syncer) SyncChanges(ctx context.Context, changed []Service, removed []string) (Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.needFull || s.contended {
		return Stats{}, ErrNeedsEverything
	}
	start := s.pl.opts.Clock()
	var stats Stats
	gone := map[string]bool{}
	for _, key := range removed {
		if s.state.written[key] != nil {
			gone[key] = true
		}
	}
	desired := make([]desiredService, 0, len(changed))
	byKey := make(map[string]bool, len(changed))
	for i := range changed {
		svc := &changed[i]
		key := svc.Key()
		norm, ok, err := normalize(*svc, s.pl.fam)
		switch {
		case err != nil:
			stats.Rejected = append(stats.Rejected, Rejection{key, err.Error()})
		case byKey[key]:
			stats.Rejected = append(stats.Rejected, Rejection{key, "duplicate service " + key})
			continue
		case ok:
			byKey[key] = true
			desired = append(desired, desiredService{key: key, raw: s.scratch.hasher.digest(svc), svc: norm,
				claims: claimsOf(&norm), fingerprint: fingerprint(&norm)})
			delete(gone, key)
			continue
		}
		// Invalid, or without an address of this family: it leaves the table, as with Sync.
		if s.state.written[key] != nil && !byKey[key] {
			gone[key] = true
		}
	}
	if s.contends(desired, gone) {
		return Stats{}, ErrNeedsEverything
	}

	p, err := s.planChanges(ctx, desired, sortedKeys(gone), start)
	if err != nil {
		s.needFull = true
		stats.Changed, stats.Removed = p.changed, p.removed
		return stats, err
	}
	err = s.apply(ctx, p, start, &stats)
	stats.Services = len(s.state.written)
	return stats, err
}

// contends reports whether a changed Service claims what another one claims: another changed
// one, or a written one that stays (its claims are those recorded).
func (s *Syncer) contends(desired []desiredService, gone map[string]bool) bool {
	changing := make(map[string]bool, len(desired))
	for i := range desired {
		changing[desired[i].key] = true
	}
	return s.state.clash(desired, func(owner string) bool { return !gone[owner] && !changing[owner] })
}
