package agentbench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// lyingBackend is the dry-run backend with one fault, to show the checks catch it.
type lyingBackend struct {
	dryRunBackend
	// miscount adds one to every incremental sync's Stats.Changed.
	miscount bool
	// loseElement drops one element from every listing.
	loseElement bool
	// failSync fails the sync with this number (from 1).
	failSync, syncs int
}

func (l *lyingBackend) sync(ctx context.Context, s *dataplane.Syncer, services []dataplane.Service, full bool) (sample, dataplane.Stats, error) {
	l.syncs++
	if l.syncs == l.failSync {
		return sample{}, dataplane.Stats{}, errors.New("simulated: the kernel refused the transaction")
	}
	smp, st, err := l.dryRunBackend.sync(ctx, s, services, full)
	if l.miscount && !full {
		st.Changed++
	}
	return smp, st, err
}

func (l *lyingBackend) table(ctx context.Context) (*tableModel, error) {
	m, err := l.dryRunBackend.table(ctx)
	if err == nil && l.loseElement {
		m.elements["service-ips"] = m.elements["service-ips"][1:]
	}
	return m, err
}

func smallSettings() settings {
	return settings{sizes: []int{40}, endpoints: 3, coldRuns: 1, resyncRuns: 1, runs: 2, budget: time.Minute}
}

func failed(checks []bench.Check) []string {
	var out []string
	for _, c := range checks {
		if !c.Passed() {
			out = append(out, c.Name)
		}
	}
	return out
}

func TestBrokenInvariantsAreReported(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		backend *lyingBackend
		want    []string // substrings of the failed checks' names, in order
	}{
		{"honest", &lyingBackend{}, nil},
		{"wrong Stats", &lyingBackend{miscount: true}, []string{"Stats"}},
		{"table differs", &lyingBackend{loseElement: true}, []string{"cold sync's table", "after the incremental syncs"}},
		{"a sync fails", &lyingBackend{failSync: 4}, []string{"every sync succeeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := &checker{}
			res, err := runSize(ctx, smallSettings(), tc.backend, check, bench.Env{}, 40)
			if err != nil {
				t.Fatal(err)
			}
			got := failed(check.checks())
			if len(got) != len(tc.want) {
				t.Fatalf("failed checks %q, want ones naming %q", got, tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("failed check %q, want one naming %q", got[i], tc.want[i])
				}
			}
			if tc.backend.failSync > 0 && res.err == nil {
				t.Error("the failed sync is not in the size's result")
			}
		})
	}
}
