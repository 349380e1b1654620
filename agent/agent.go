// Package agent is fleetslice's node agent: it watches Services,
// EndpointSlices (local and imported), ServiceImports and its own Node, picks
// the endpoints this node uses with package agent/selection, and programs
// them with package agent/dataplane, one atomic transaction per sync.
//
// The agent decides little. Informer events mark Services dirty; a sync
// converts only those again and hands every Service to the dataplane, which
// rewrites only the ones whose input changed. Syncs are rate-limited (bursts
// of changes make one sync), a periodic full sync repairs drift, and a failed
// sync is retried with backoff while the readiness check reports the error.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// Dataplane programs Services for one IP family. *dataplane.Syncer and
// *dataplane.DryRun implement it; see also NewKernelDataplane.
type Dataplane interface {
	Sync(ctx context.Context, services []dataplane.Service, full bool) (dataplane.Stats, error)
}

// ChangesDataplane is a Dataplane that can also be told only what changed since its last sync,
// so that an incremental sync costs what the change costs, not what the table holds. It returns
// dataplane.ErrNeedsEverything when it cannot, and the agent then calls Sync with every Service.
// *dataplane.Syncer and *dataplane.DryRun implement it.
type ChangesDataplane interface {
	Dataplane
	SyncChanges(ctx context.Context, updated []dataplane.Service, removed []string) (dataplane.Stats, error)
}

// Options configure an Agent.
type Options struct {
	// NodeName is the Node the agent programs; required.
	NodeName string
	// Dataplanes are synced one after the other with the same Services,
	// typically one per IP family; at least one is required.
	Dataplanes []Dataplane
	// MinSyncInterval is the least time between two syncs: a change after
	// a quiet period is programmed at once, a burst of changes in one
	// sync.
	MinSyncInterval time.Duration
	// SyncPeriod is how often a full sync compares every Service with the
	// kernel's tables and writes where they differ, which repairs drift.
	SyncPeriod time.Duration
	// DriftCheckPeriod is how often dataplanes that can read their table
	// back (DriftChecker) compare it with what they last programmed; drift
	// is counted, logged and repaired by a full sync at once.
	DriftCheckPeriod time.Duration
	// RetryDelay is the first wait after a failed sync; it doubles on each
	// further failure up to MaxRetryDelay.
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	// WatchServiceImports adds ServiceImport IPs to derived Services.
	WatchServiceImports bool
	// ClusterID is this node's cluster in the ClusterSet when the cluster has
	// no ClusterProperty cluster.clusterset.k8s.io: the agent watches that
	// property and follows it, as the manager does, and falls back to
	// ClusterID without one (see ResolveClusterID). With an id the agent
	// follows the cluster allocation of PreferSameCluster imports; without
	// one they spread over every cluster.
	ClusterID string
	// APIReader, when set, is used for one uncached read of the
	// ClusterProperty before watching it, so that an agent whose RBAC lacks
	// it falls back to ClusterID instead of waiting for a watch that never
	// syncs.
	APIReader client.Reader
	// OnSync, when set, is called after every sync attempt (for the dry-run
	// output, and for tests).
	OnSync func(Report)
	Log    logr.Logger
}

// Defaults for Options.
const (
	DefaultMinSyncInterval = time.Second
	DefaultSyncPeriod      = time.Hour
	// A check costs one netlink round trip while nothing changed in the
	// node's nftables ruleset, and a read of the table otherwise.
	DefaultDriftCheckPeriod = time.Minute
	DefaultRetryDelay       = time.Second
	DefaultMaxRetryDelay    = time.Minute
)

// DefaultOptions returns the defaults of every interval; NodeName and
// Dataplanes have none.
func DefaultOptions() Options {
	return Options{
		MinSyncInterval:  DefaultMinSyncInterval,
		SyncPeriod:       DefaultSyncPeriod,
		DriftCheckPeriod: DefaultDriftCheckPeriod,
		RetryDelay:       DefaultRetryDelay,
		MaxRetryDelay:    DefaultMaxRetryDelay,
	}
}

// Validate rejects options the agent cannot run with.
func (o Options) Validate() error {
	switch {
	case o.NodeName == "":
		return errors.New("agent: node name is required")
	case len(o.Dataplanes) == 0 || slices.Contains(o.Dataplanes, nil):
		return errors.New("agent: at least one non-nil dataplane is required")
	case o.MinSyncInterval <= 0 || o.SyncPeriod <= 0 || o.DriftCheckPeriod <= 0 || o.RetryDelay <= 0:
		return fmt.Errorf("agent: min sync interval %s, sync period %s, drift check period %s and retry delay %s must be positive (start from DefaultOptions)",
			o.MinSyncInterval, o.SyncPeriod, o.DriftCheckPeriod, o.RetryDelay)
	case o.MaxRetryDelay < o.RetryDelay:
		return fmt.Errorf("agent: max retry delay %s is below the retry delay %s", o.MaxRetryDelay, o.RetryDelay)
	}
	return nil
}

// Report describes one sync attempt.
type Report struct {
	// Full is true when the agent asked for a full sync (the dataplanes may
	// also decide to make one on their own: see Stats[i].Full and Rebuilt).
	Full bool
	// Services is the dataplane input, ordered by namespace and name: every
	// programmed Service, listed for Options.OnSync only (an incremental sync
	// does not otherwise build the list).
	Services []dataplane.Service
	// Programmed counts the Services given to the dataplanes.
	Programmed int
	// Converted counts the Services converted again for this sync.
	Converted int
	// Stats has one entry per dataplane, in Options order; entries after a
	// failing dataplane are zero.
	Stats    []dataplane.Stats
	Err      error
	Started  time.Time
	Duration time.Duration
}

// Agent runs the node agent. It implements controller-runtime's
// manager.Runnable, so a manager starts it after its cache.
type Agent struct {
	opts      Options
	informers cache.Informers
	log       logr.Logger
	store     *store
	kickCh    chan struct{}

	mu sync.Mutex
	// readiness is nil after a successful sync, the reason otherwise.
	readiness error
	// rejected remembers the dataplanes' last rejections so that only new
	// ones are logged.
	rejected map[string]string

	// The cluster identity (clusterid.go): what the ClusterProperty watch
	// saw, why it is not watched, and the id last resolved and logged.
	property       propertyState
	propertyValue  string
	propertyNote   string
	identity       ClusterIdentity
	identityLogged bool
}

// New returns an Agent that reads from informers, normally a cache built with
// CacheOptions(opts.NodeName).
func New(informers cache.Informers, opts Options) (*Agent, error) {
	if informers == nil {
		return nil, errors.New("agent: nil informers")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	a := &Agent{
		opts:      opts,
		informers: informers,
		log:       opts.Log.WithValues("node", opts.NodeName),
		kickCh:    make(chan struct{}, 1),
		readiness: errors.New("the first sync has not finished yet"),
		rejected:  map[string]string{},
	}
	a.store = newStore(opts.NodeName, time.Now(), a.kick)
	return a, nil
}

// NeedLeaderElection is false: every node runs its own agent.
func (a *Agent) NeedLeaderElection() bool { return false }

// Ready returns nil once the last sync has programmed every dataplane, and
// the reason otherwise.
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.readiness
}

// ReadyzCheck is Ready in the shape of a controller-runtime healthz.Checker.
func (a *Agent) ReadyzCheck(*http.Request) error { return a.Ready() }

func (a *Agent) kick() {
	lastQueuedTimestamp.SetToCurrentTime()
	select {
	case a.kickCh <- struct{}{}:
	default:
	}
}

// Start watches, waits for the initial lists and syncs until ctx ends.
func (a *Agent) Start(ctx context.Context) error {
	regs, err := a.watch(ctx)
	if err != nil {
		a.setReadiness(err)
		return err
	}
	synced := make([]toolscache.InformerSynced, len(regs))
	for i, r := range regs {
		synced[i] = r.HasSynced
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		// Only a cancelled context ends the wait: a shutdown, not an error.
		return nil
	}
	// The first sync already knows the cluster: no moment of spreading over every cluster.
	a.applyClusterIdentity()
	a.log.Info("informers synced, starting to program the dataplane")
	a.loop(ctx)
	return nil
}

// loop runs syncs: at once when something changed and MinSyncInterval has
// passed since the last one, after a backoff when the last one failed, and
// in full every SyncPeriod or as soon as a drift check (every
// DriftCheckPeriod) finds the table changed behind the agent's back.
func (a *Agent) loop(ctx context.Context) {
	var (
		lastAttempt, lastFull time.Time
		retryAt               time.Time
		retryDelay            time.Duration
		failing               bool
		pendingChange         = true // the initial lists
		lastDriftCheck        = time.Now()
		// cleanupAt is when the dataplanes can delete chains the last sync left flushed.
		cleanupAt time.Time
	)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		now := time.Now()
		if !failing && !lastFull.IsZero() && now.Sub(lastDriftCheck) >= a.opts.DriftCheckPeriod {
			lastDriftCheck = now
			if a.checkDrift(ctx) {
				lastFull = time.Time{} // repair now
			}
		}
		full := lastFull.IsZero() || now.Sub(lastFull) >= a.opts.SyncPeriod
		due := lastAttempt.Add(a.opts.MinSyncInterval)
		if failing {
			due = later(due, retryAt)
		}
		cleanup := !cleanupAt.IsZero() && !now.Before(cleanupAt)
		wanted := pendingChange || failing || full || cleanup
		if wanted && !now.Before(due) {
			pendingChange = false
			if !failing && !full && !cleanup && !a.store.hasDirty() {
				// A kick that arrived during the last sync, whose change
				// that sync already took.
				continue
			}
			report := a.sync(ctx, full)
			if ctx.Err() != nil {
				return
			}
			lastAttempt = time.Now()
			cleanupAt = report.cleanupAt()
			if report.Err != nil {
				failing = true
				retryDelay = min(max(2*retryDelay, a.opts.RetryDelay), a.opts.MaxRetryDelay)
				retryAt = lastAttempt.Add(retryDelay)
				a.log.Error(report.Err, "dataplane sync failed; the node is unready until a retry succeeds", "retryIn", retryDelay.String())
			} else {
				if failing {
					a.log.Info("dataplane sync succeeded again")
				}
				failing, retryDelay = false, 0
				if full {
					lastFull = lastAttempt
				}
			}
			continue
		}
		wait := lastFull.Add(a.opts.SyncPeriod).Sub(now)
		if wanted {
			wait = due.Sub(now)
		}
		if !cleanupAt.IsZero() {
			wait = min(wait, later(cleanupAt, due).Sub(now))
		}
		if !failing && !lastFull.IsZero() {
			// Only then is a check due: a failing or unstarted dataplane makes a full sync anyway.
			wait = min(wait, lastDriftCheck.Add(a.opts.DriftCheckPeriod).Sub(now))
		}
		resetTimer(timer, wait)
		select {
		case <-ctx.Done():
			return
		case <-a.kickCh:
			pendingChange = true
		case <-timer.C:
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(max(d, 0))
}

// sync converts what changed and runs every dataplane once.
func (a *Agent) sync(ctx context.Context, full bool) Report {
	start := time.Now()
	p := a.store.refresh(full)
	report := Report{Full: full, Programmed: p.counts.programmed, Converted: p.changed, Started: start,
		Stats: make([]dataplane.Stats, len(a.opts.Dataplanes))}
	for key, problems := range p.problems {
		a.log.V(1).Info("parts of a Service were left out", "service", key.String(), "problems", problems)
	}
	didFull := full
	var errs []error
	for i, dp := range a.opts.Dataplanes {
		stats, err := syncDataplane(ctx, dp, &p, full)
		report.Stats[i] = stats
		didFull = didFull || stats.Full
		if err != nil {
			errs = append(errs, err)
		}
	}
	report.Err = errors.Join(errs...)
	report.Duration = time.Since(start)

	mode := ModePartial
	if didFull {
		mode = ModeFull
		syncFullDuration.Observe(report.Duration.Seconds())
	} else {
		syncPartialDuration.Observe(report.Duration.Seconds())
	}
	syncDuration.Observe(report.Duration.Seconds())
	if report.Err != nil {
		syncTotal.WithLabelValues(mode, ResultError).Inc()
		nftablesSyncFailures.Inc()
		a.store.restoreTriggers(p.triggers)
		a.setReadiness(fmt.Errorf("dataplane sync failed: %w", report.Err))
	} else {
		end := time.Now()
		syncTotal.WithLabelValues(mode, ResultSuccess).Inc()
		lastSyncTimestamp.Set(float64(end.UnixNano()) / 1e9)
		for _, times := range p.triggers {
			for _, t := range times {
				networkProgrammingDuration.Observe(end.Sub(t).Seconds())
			}
		}
		servicesProgrammed.Set(float64(p.counts.programmed))
		noLocalEndpoints.WithLabelValues("internal").Set(float64(p.counts.noLocalInternal))
		noLocalEndpoints.WithLabelValues("external").Set(float64(p.counts.noLocalExternal))
		a.setReadiness(nil)
	}
	a.logRejections(report.Stats)
	for i, st := range report.Stats {
		if st.Rebuilt != "" {
			a.log.Info("rebuilt the nftables table instead of writing only what differed", "dataplane", i, "reason", st.Rebuilt)
		}
	}
	a.log.V(1).Info("synced", "mode", mode, "services", p.counts.programmed, "converted", p.changed, "skipped", p.counts.skipped,
		"duration", report.Duration.String(), "error", report.Err)
	if a.opts.OnSync != nil {
		report.Services = p.all()
		a.opts.OnSync(report)
	}
	return report
}

// syncDataplane gives dp only the changes when it takes them, and every Service otherwise.
func syncDataplane(ctx context.Context, dp Dataplane, p *pending, full bool) (dataplane.Stats, error) {
	if cd, ok := dp.(ChangesDataplane); ok && !full {
		stats, err := cd.SyncChanges(ctx, p.updated, p.removed)
		if !errors.Is(err, dataplane.ErrNeedsEverything) {
			return stats, err
		}
	}
	return dp.Sync(ctx, p.all(), full)
}

func (a *Agent) setReadiness(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.readiness = err
}

// logRejections logs each Service a dataplane refuses once, when the reason
// first appears, instead of on every sync.
func (a *Agent) logRejections(stats []dataplane.Stats) {
	current := map[string]string{}
	for _, st := range stats {
		for _, r := range st.Rejected {
			current[r.Service] = r.Reason
		}
	}
	servicesRejected.Set(float64(len(current)))
	a.mu.Lock()
	defer a.mu.Unlock()
	for svc, reason := range current {
		if a.rejected[svc] != reason {
			a.log.Info("Service left out of the dataplane", "service", svc, "reason", reason)
		}
	}
	a.rejected = current
}

// cleanupAt is the earliest time a dataplane can delete chains this sync left flushed.
func (r Report) cleanupAt() time.Time {
	var at time.Time
	for _, st := range r.Stats {
		if !st.CleanupAt.IsZero() && (at.IsZero() || st.CleanupAt.Before(at)) {
			at = st.CleanupAt
		}
	}
	return at
}
