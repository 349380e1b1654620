package coalesce

import (
	"encoding/binary"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var coalesceSvc = types.NamespacedName{Namespace: "ns", Name: "web"}

// step is one call on a coalescer: a change, or a sync about to run, at ms milliseconds.
type step struct {
	ms     int
	sync   bool
	wantMS int // the delay (change) or the remaining hold (sync) expected, in ms
}

func TestCoalescer(t *testing.T) {
	const quiet, budget = 100 * time.Millisecond, 500 * time.Millisecond
	cases := []struct {
		name  string
		steps []step
	}{
		{"a lone change syncs at once", []step{{ms: 0}, {ms: 0, sync: true}}},
		{"a change after a quiet spell syncs at once", []step{
			{ms: 0}, {ms: 0, sync: true}, {ms: 250}, {ms: 250, sync: true},
		}},
		{"changes arriving before the lone change's sync ride along with it", []step{
			{ms: 0}, {ms: 5}, {ms: 10, sync: true},
		}},
		{"a burst after a sync waits for the quiet period", []step{
			{ms: 0}, {ms: 1, sync: true}, {ms: 20, wantMS: 100}, {ms: 60, wantMS: 100},
			{ms: 120, sync: true, wantMS: 40}, {ms: 160, sync: true},
		}},
		{"a burst that never settles syncs at the budget", []step{
			{ms: 0}, {ms: 0, sync: true},
			{ms: 50, wantMS: 100}, {ms: 120, wantMS: 100}, {ms: 200, wantMS: 100}, {ms: 280, wantMS: 100},
			{ms: 360, wantMS: 100}, {ms: 440, wantMS: 100}, {ms: 520, wantMS: 30},
			{ms: 540, sync: true, wantMS: 10}, {ms: 550, sync: true},
		}},
		{"after a budget sync the burst goes on in a new window", []step{
			{ms: 0}, {ms: 0, sync: true}, {ms: 50, wantMS: 100}, {ms: 130, wantMS: 100},
			{ms: 210, wantMS: 100}, {ms: 290, wantMS: 100}, {ms: 370, wantMS: 100}, {ms: 450, wantMS: 100},
			{ms: 530, wantMS: 20}, {ms: 550, sync: true}, {ms: 560, wantMS: 100}, {ms: 660, sync: true},
		}},
		{"a sync with nothing pending runs", []step{{ms: 0, sync: true}, {ms: 10}, {ms: 10, sync: true}, {ms: 11, sync: true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(quiet, budget)
			start := time.Unix(1000, 0)
			for i, s := range tc.steps {
				now := start.Add(time.Duration(s.ms) * time.Millisecond)
				var got time.Duration
				if s.sync {
					got = c.Hold(coalesceSvc, now)
				} else {
					got = c.Changed(coalesceSvc, now)
				}
				if want := time.Duration(s.wantMS) * time.Millisecond; got != want {
					t.Fatalf("step %d (%+v): got %s, want %s", i, s, got, want)
				}
			}
		})
	}
}

func TestCoalescerOffWithoutBudget(t *testing.T) {
	c := New(100*time.Millisecond, 0)
	now := time.Unix(1000, 0)
	for i := range 5 {
		if d := c.Changed(coalesceSvc, now.Add(time.Duration(i)*time.Millisecond)); d != 0 {
			t.Fatalf("change %d delayed %s with coalescing off", i, d)
		}
	}
	if d := c.Hold(coalesceSvc, now); d != 0 {
		t.Fatalf("sync held %s with coalescing off", d)
	}
}

// FuzzCoalescer drives a coalescer with any sequence of changes and syncs (a sync only when the
// queue would run one: at or after the delay a change asked for) and checks its promises: no
// change waits past the budget, a change after a quiet spell waits for nothing, and a sync that
// is let through takes every pending change.
func FuzzCoalescer(f *testing.F) {
	f.Add([]byte{0, 5, 1, 20, 40, 3, 90, 200, 7})
	f.Add([]byte{255, 255, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		quiet := time.Duration(data[0]) * time.Millisecond
		budget := quiet + time.Duration(data[1])*time.Millisecond
		c := New(quiet, budget)
		now := time.Unix(1000, 0)
		var oldest, lastChange time.Time // oldest change not taken by a sync
		for i := 2; i+1 < len(data); i += 2 {
			now = now.Add(time.Duration(binary.BigEndian.Uint16(data[i:i+2])%700) * time.Millisecond)
			if data[i]%3 == 0 {
				wait := c.Hold(coalesceSvc, now)
				if !oldest.IsZero() && now.Add(wait).After(latest(now, oldest.Add(budget))) {
					t.Fatalf("sync held until %s, past the budget of the change at %s", now.Add(wait), oldest)
				}
				if wait == 0 {
					oldest = time.Time{}
				}
				continue
			}
			quietBefore := lastChange.IsZero() || now.Sub(lastChange) >= quiet
			d := c.Changed(coalesceSvc, now)
			if oldest.IsZero() {
				oldest = now
				if quietBefore && d != 0 {
					t.Fatalf("a change after a quiet spell waits %s", d)
				}
			}
			// A sync the queue would have run already (this model runs syncs only when told) is due now.
			if d < 0 || now.Add(d).After(latest(now, oldest.Add(budget))) {
				t.Fatalf("change at %s asked for a sync at %s, past the budget of the change at %s", now, now.Add(d), oldest)
			}
			lastChange = now
		}
	})
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
