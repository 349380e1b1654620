package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

// renewalGaps follows every member's Lease in the broker and keeps the longest time each went
// without a renewal: what the peers' liveness verdicts saw while a fault struck. A gap longer
// than the lease duration is a member its peers were entitled to find lost.
type renewalGaps struct {
	mu      sync.Mutex
	last    map[string]time.Time
	longest map[string]time.Duration
	cancel  context.CancelFunc
	done    chan struct{}
}

func followRenewals() (*renewalGaps, error) {
	broker, err := clusterSet.Client(clusterSet.Broker)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &renewalGaps{last: map[string]time.Time{}, longest: map[string]time.Duration{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		for ctx.Err() == nil {
			list := &coordinationv1.LeaseList{}
			if err := broker.List(ctx, list, client.InNamespace(multicluster.DefaultNamespace)); err == nil {
				g.observe(list.Items)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return g, nil
}

func (g *renewalGaps) observe(leases []coordinationv1.Lease) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range leases {
		l, ok := liveness.FromLease(&leases[i], size.Lease)
		if !ok || l.RenewTime.IsZero() {
			continue
		}
		if prev, seen := g.last[l.Cluster]; seen && l.RenewTime.After(prev) {
			g.longest[l.Cluster] = max(g.longest[l.Cluster], l.RenewTime.Sub(prev))
		}
		if l.RenewTime.After(g.last[l.Cluster]) {
			g.last[l.Cluster] = l.RenewTime
		}
	}
}

// stop ends the following and returns the longest gaps, each member's "name gap", sorted.
func (g *renewalGaps) stop() string {
	g.cancel()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for cluster, gap := range g.longest {
		out = append(out, fmt.Sprintf("%s %s", cluster, gap.Round(100*time.Millisecond)))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
