package chaos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

// steadyWatch follows the "steady" Service's slices in every member, local and imported, from
// watches, and records every moment one of its endpoints was missing or listed twice. Its Pods
// never change, so no fault may ever touch what is written for them: a manager restart, a
// broker outage or failing writes that made an endpoint vanish even briefly would show here
// although the end state looks right.
type steadyWatch struct {
	mu         sync.Mutex
	want       map[string][]string // source cluster -> its steady addresses
	violations []violation
	cancel     context.CancelFunc
}

// violation is one observed bad state: an endpoint missing, or one listed twice.
type violation struct {
	At             time.Time
	Member, Source string
	Missing, Twice bool
	Listed, Wanted int
}

func (v violation) String() string {
	return fmt.Sprintf("%s in %s from %s: %d of %d listed (missing %t, twice %t)",
		v.At.Format("15:04:05.000"), v.Member, v.Source, v.Listed, v.Wanted, v.Missing, v.Twice)
}

func watchSteady(ctx context.Context) (*steadyWatch, error) {
	w := &steadyWatch{want: map[string][]string{}}
	for _, m := range fleet {
		pods, err := readyPods(ctx, m)
		if err != nil {
			return nil, err
		}
		w.want[m.name] = sortedCopy(pods[steadyService])
	}
	watchCtx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for _, m := range fleet {
		c, err := cache.New(m.cfg, cache.Options{Scheme: localset.Scheme(),
			DefaultNamespaces: map[string]cache.Config{namespace: {}}})
		if err != nil {
			cancel()
			return nil, err
		}
		inf, err := c.GetInformer(watchCtx, &discoveryv1.EndpointSlice{})
		if err != nil {
			cancel()
			return nil, err
		}
		member := m.name
		onChange := func(any) { w.look(watchCtx, member, c) }
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: onChange, UpdateFunc: func(_, n any) { onChange(n) }, DeleteFunc: onChange,
		}); err != nil {
			cancel()
			return nil, err
		}
		go func() { _ = c.Start(watchCtx) }()
		if !c.WaitForCacheSync(ctx) {
			cancel()
			return nil, fmt.Errorf("the steady watch of %s did not sync", member)
		}
	}
	return w, nil
}

// look compares what the member's cache holds for the steady Service with what it should.
func (w *steadyWatch) look(ctx context.Context, member string, c cache.Cache) {
	list := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return
	}
	// What is listed for the member's own Pods and what is imported from each cluster (the
	// member's own export included), every ready address as often as it occurs.
	local, imported := []string{}, map[string][]string{}
	for _, s := range list.Items {
		var ready []string
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready = append(ready, ep.Addresses...)
			}
		}
		switch {
		case s.Labels[discoveryv1.LabelManagedBy] == endpointslice.ManagedBy && s.Labels[discoveryv1.LabelServiceName] == steadyService:
			local = append(local, ready...)
		case s.Labels[discoveryv1.LabelManagedBy] == sliceplan.ManagedBy && s.Labels[mcsv1beta1.LabelServiceName] == steadyService:
			source := s.Labels[mcsv1beta1.LabelSourceCluster]
			imported[source] = append(imported[source], ready...)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.compare(member, "local", local, w.want[member])
	for source, want := range w.want {
		w.compare(member, source, imported[source], want)
	}
}

// compare records a violation when got is not exactly want; the caller holds w.mu.
func (w *steadyWatch) compare(member, source string, listed, want []string) {
	got := sortedCopy(listed)
	if slices.Equal(got, want) {
		return
	}
	distinct := slices.Compact(slices.Clone(got))
	missing := false
	for _, addr := range want {
		if _, found := slices.BinarySearch(distinct, addr); !found {
			missing = true
		}
	}
	w.violations = append(w.violations, violation{At: time.Now(), Member: member, Source: source,
		Missing: missing, Twice: len(distinct) != len(got), Listed: len(got), Wanted: len(want)})
}

// since returns the violations observed from t on.
func (w *steadyWatch) since(t time.Time) []violation {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []violation
	for _, v := range w.violations {
		if !v.At.Before(t) {
			out = append(out, v)
		}
	}
	return out
}

func (w *steadyWatch) stop() { w.cancel() }
