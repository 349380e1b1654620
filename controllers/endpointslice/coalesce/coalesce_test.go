package coalesce

import (
	"encoding/binary"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

var coalesceSvc = types.NamespacedName{Namespace: "ns", Name: "web"}

// step is one call on a coalescer: a change, or a sync about to run, at ms milliseconds, or (tookMS
// above 0) a sync that finished after tookMS.
type step struct {
	ms     int
	sync   bool
	wantMS int // the delay (change) or the remaining hold (sync) expected, in ms
	tookMS int
}

func TestCoalescer(t *testing.T) {
	// Window and MaxDelay alike: these cases are the fixed window's, which syncs never stretch.
	cfg := Config{Quiet: 100 * time.Millisecond, Window: 500 * time.Millisecond, MaxDelay: 500 * time.Millisecond}
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
		{"after a burst's sync the Service churns: the next window runs to its end", []step{
			{ms: 0}, {ms: 0, sync: true}, {ms: 50, wantMS: 100}, {ms: 130, wantMS: 100},
			{ms: 210, wantMS: 100}, {ms: 290, wantMS: 100}, {ms: 370, wantMS: 100}, {ms: 450, wantMS: 100},
			{ms: 530, wantMS: 20}, {ms: 550, sync: true}, {ms: 560, wantMS: 500}, {ms: 660, sync: true, wantMS: 400},
			{ms: 800, wantMS: 260}, {ms: 1060, sync: true},
		}},
		{"under churn a quiet spell does not close the window, nor sync a change alone", []step{
			{ms: 0}, {ms: 0, sync: true}, {ms: 10, wantMS: 100}, {ms: 110, sync: true},
			{ms: 120, wantMS: 500}, {ms: 300, wantMS: 320}, {ms: 620, sync: true},
			{ms: 1000, wantMS: 500}, {ms: 1500, sync: true}, {ms: 2001}, {ms: 2001, sync: true},
		}},
		{"a burst window after a burst's sync, the churn is over", []step{
			{ms: 0}, {ms: 0, sync: true}, {ms: 10, wantMS: 100}, {ms: 110, sync: true},
			{ms: 610}, {ms: 610, sync: true}, {ms: 650, wantMS: 100}, {ms: 750, sync: true},
		}},
		{"a sync with nothing pending runs", []step{{ms: 0, sync: true}, {ms: 10}, {ms: 10, sync: true}, {ms: 11, sync: true}}},
		{"syncs at the cap do not stretch it", []step{
			{ms: 0}, {ms: 0, sync: true}, {tookMS: 400}, {ms: 50, wantMS: 100}, {ms: 130, wantMS: 100},
			{ms: 210, wantMS: 100}, {ms: 290, wantMS: 100}, {ms: 370, wantMS: 100}, {ms: 450, wantMS: 100},
			{ms: 530, wantMS: 20}, {ms: 550, sync: true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { play(t, New(cfg), tc.steps) })
	}
}

// TestCoalescerAdapts covers the window's stretch: by the shorter of the Service's own last two
// syncs, at most twice the window before from one sync to the next, up to the cap, and never for a
// change after a quiet spell.
func TestCoalescerAdapts(t *testing.T) {
	cfg := Config{Quiet: 100 * time.Millisecond, Window: 200 * time.Millisecond, MaxDelay: time.Second}
	cases := []struct {
		name  string
		steps []step
	}{
		{"quick syncs keep the window", []step{
			{ms: 0}, {ms: 0, sync: true}, {tookMS: 50},
			{ms: 50, wantMS: 100}, {ms: 130, wantMS: 100}, {ms: 210, wantMS: 40}, {ms: 250, sync: true},
		}},
		{"slow syncs stretch the next burst's window to the square of the shorter of the last two over the base window", []step{
			// 400 ms² / 200 ms = 800 ms, reached from 200 ms in two doublings.
			{ms: 0}, {ms: 0, sync: true}, {tookMS: 900}, {tookMS: 400}, {tookMS: 400},
			{ms: 50, wantMS: 100}, {ms: 130, wantMS: 100}, {ms: 210, wantMS: 100}, {ms: 290, wantMS: 100},
			{ms: 370, wantMS: 100}, {ms: 450, wantMS: 100}, {ms: 530, wantMS: 100}, {ms: 610, wantMS: 100},
			{ms: 690, wantMS: 100}, {ms: 770, wantMS: 80}, {ms: 800, sync: true, wantMS: 50}, {ms: 850, sync: true},
		}},
		{"a sync that ends during a burst widens that burst's window", []step{
			// 300 ms² / 200 ms = 450 ms, but at most twice the 200 ms before: 400 ms from the burst's
			// first change at 20, which the quiet spell closes sooner.
			{tookMS: 300}, {ms: 0}, {ms: 0, sync: true}, {ms: 20, wantMS: 100}, {ms: 100, wantMS: 100},
			{ms: 180, wantMS: 40}, {tookMS: 300}, {ms: 220, sync: true, wantMS: 60}, {ms: 280, sync: true},
		}},
		{"the cap holds however slow the syncs", []step{
			{ms: 0}, {ms: 0, sync: true}, {tookMS: 10_000}, {tookMS: 10_000}, {tookMS: 10_000}, {tookMS: 10_000},
			{ms: 50, wantMS: 100}, {ms: 130, wantMS: 100}, {ms: 210, wantMS: 100}, {ms: 290, wantMS: 100},
			{ms: 370, wantMS: 100}, {ms: 450, wantMS: 100}, {ms: 530, wantMS: 100}, {ms: 610, wantMS: 100},
			{ms: 690, wantMS: 100}, {ms: 770, wantMS: 100}, {ms: 850, wantMS: 100}, {ms: 930, wantMS: 100},
			{ms: 1010, wantMS: 40}, {ms: 1050, sync: true},
		}},
		{"a change after a quiet spell syncs at once however slow the last sync", []step{
			{ms: 0}, {ms: 0, sync: true}, {tookMS: 10_000}, {tookMS: 10_000}, {ms: 500}, {ms: 500, sync: true},
		}},
		{"a burst that settles syncs at the quiet period, not at its stretched window", []step{
			{ms: 0}, {ms: 0, sync: true}, {tookMS: 300}, {tookMS: 300}, {ms: 50, wantMS: 100}, {ms: 100, wantMS: 100},
			{ms: 200, sync: true},
		}},
		{"one slow sync among quick ones keeps the window", []step{
			// A sync that rewrote every slice, between quick ones: the next burst still waits 200 ms.
			{tookMS: 50}, {ms: 0}, {ms: 0, sync: true}, {tookMS: 5_000},
			{ms: 50, wantMS: 100}, {ms: 130, wantMS: 100}, {ms: 210, wantMS: 40}, {ms: 250, sync: true},
			// A second slow one, in a row: now the load lasts, and the window doubles, and again
			// after a third, on its way to the cap.
			{tookMS: 5_000}, {ms: 300, wantMS: 400}, {ms: 700, sync: true},
			{tookMS: 5_000}, {ms: 710, wantMS: 800}, {ms: 1510, sync: true},
		}},
		{"the window falls back at once when the syncs are quick again", []step{
			{tookMS: 5_000}, {tookMS: 5_000}, {tookMS: 5_000}, {tookMS: 5_000},
			{ms: 0}, {ms: 0, sync: true}, {tookMS: 50}, {ms: 10, wantMS: 100}, {ms: 110, sync: true},
			{ms: 120, wantMS: 200}, {ms: 320, sync: true},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { play(t, New(cfg), tc.steps) })
	}
}

func play(t *testing.T, c *Coalescer, steps []step) {
	t.Helper()
	start := time.Unix(1000, 0)
	for i, s := range steps {
		now := start.Add(time.Duration(s.ms) * time.Millisecond)
		var got time.Duration
		switch {
		case s.tookMS > 0:
			c.Synced(coalesceSvc, time.Duration(s.tookMS)*time.Millisecond)
			continue
		case s.sync:
			got = c.Hold(coalesceSvc, now)
		default:
			got = c.Changed(coalesceSvc, now)
		}
		if want := time.Duration(s.wantMS) * time.Millisecond; got != want {
			t.Fatalf("step %d (%+v): got %s, want %s", i, s, got, want)
		}
	}
}

func TestBurstWindow(t *testing.T) {
	cfg := Config{Quiet: 100 * time.Millisecond, Window: 200 * time.Millisecond, MaxDelay: time.Second}
	for _, tc := range []struct{ took, want time.Duration }{
		{0, 200 * time.Millisecond},
		{-time.Second, 200 * time.Millisecond},
		{100 * time.Millisecond, 200 * time.Millisecond},
		{200 * time.Millisecond, 200 * time.Millisecond},
		{300 * time.Millisecond, 450 * time.Millisecond},
		{400 * time.Millisecond, 800 * time.Millisecond},
		{447 * time.Millisecond, 999045 * time.Microsecond},
		{448 * time.Millisecond, time.Second},
		{10 * time.Second, time.Second},
		{time.Duration(1<<63 - 1), time.Second},
	} {
		if got := cfg.BurstWindow(tc.took); got != tc.want {
			t.Errorf("after a sync of %s: window %s, want %s", tc.took, got, tc.want)
		}
	}
	if got := (Config{Window: time.Second, MaxDelay: 300 * time.Millisecond}).BurstWindow(0); got != 300*time.Millisecond {
		t.Errorf("a window above the cap gives %s, want the cap", got)
	}
	if got := (Config{MaxDelay: time.Second}).BurstWindow(time.Millisecond); got != time.Second {
		t.Errorf("without a base window a sync gives %s, want the cap", got)
	}
}

func TestCoalescerOffWithoutBudget(t *testing.T) {
	c := New(Config{Quiet: 100 * time.Millisecond, Window: 200 * time.Millisecond})
	c.Synced(coalesceSvc, time.Second)
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

// FuzzCoalescer drives a coalescer with any sequence of changes, syncs (a sync only when the queue
// would run one: at or after the delay a change asked for) and reports of how long a sync took,
// and checks its promises: no change waits past the cap; a change after a quiet spell, longer than
// the cap after the last sync of a burst, waits for nothing; after a sync of a burst, the next sync
// of changes comes no sooner than the base window (a Service under churn syncs at most once per
// window); while the syncs are quick, no change waits past the base window; and the burst window
// is monotone in the observed sync duration, between the base window and the cap.
func FuzzCoalescer(f *testing.F) {
	f.Add([]byte{0, 5, 10, 1, 20, 40, 3, 90, 200, 7})
	f.Add([]byte{255, 255, 255, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{100, 100, 200, 1, 0, 1, 50, 80, 0, 0, 10, 2, 40, 5, 80, 8, 80})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		cfg := Config{Quiet: time.Duration(data[0]) * time.Millisecond}
		cfg.Window = cfg.Quiet + time.Duration(data[1])*time.Millisecond
		cfg.MaxDelay = cfg.Window + 4*time.Duration(data[2])*time.Millisecond
		c := New(cfg)
		now := time.Unix(1000, 0)
		var oldest, lastChange time.Time // oldest change not taken by a sync
		var lastTook time.Duration
		// burst is set while the pending changes are a burst (the first of them was delayed);
		// burstSynced is when the latest sync of a burst ran.
		burst := false
		var burstSynced time.Time
		// bound is the latest a sync of the pending changes may be due at.
		bound := func() time.Time {
			limit := cfg.MaxDelay
			if lastTook <= cfg.Window {
				limit = cfg.Window // quick syncs: a quiet cluster pays no more than the base window
			}
			return latest(now, oldest.Add(limit))
		}
		for i := 3; i+1 < len(data); i += 2 {
			arg := time.Duration(binary.BigEndian.Uint16(data[i:i+2])%700) * time.Millisecond
			switch data[i] % 4 {
			case 0:
				now = now.Add(arg)
				wait := c.Hold(coalesceSvc, now)
				if !oldest.IsZero() && now.Add(wait).After(bound()) {
					t.Fatalf("sync held until %s, past the bound of the change at %s (last sync took %s)", now.Add(wait), oldest, lastTook)
				}
				if wait == 0 && !oldest.IsZero() {
					if !burstSynced.IsZero() && now.Sub(burstSynced) < min(cfg.Window, cfg.MaxDelay) {
						t.Fatalf("sync of changes at %s, %s after the sync of a burst, sooner than the window %s", now, now.Sub(burstSynced), cfg.Window)
					}
					if burst {
						burstSynced = now
					}
					oldest = time.Time{}
				}
			case 1:
				lastTook = 3 * arg
				c.Synced(coalesceSvc, lastTook)
				checkWindow(t, cfg, arg, lastTook)
			default:
				now = now.Add(arg)
				quietBefore := lastChange.IsZero() || now.Sub(lastChange) >= cfg.Quiet
				d := c.Changed(coalesceSvc, now)
				if oldest.IsZero() {
					oldest = now
					burst = d > 0
					if quietBefore && (burstSynced.IsZero() || now.Sub(burstSynced) >= cfg.MaxDelay) && d != 0 {
						t.Fatalf("a change after a quiet spell, %s after the last sync of a burst, waits %s", now.Sub(burstSynced), d)
					}
				}
				// A sync the queue would have run already (this model runs syncs only when told) is due now.
				if d < 0 || now.Add(d).After(bound()) {
					t.Fatalf("change at %s asked for a sync at %s, past the bound of the change at %s (last sync took %s)", now, now.Add(d), oldest, lastTook)
				}
				lastChange = now
			}
		}
	})
}

// checkWindow holds BurstWindow to its bounds and to monotony for two sync durations a <= b.
func checkWindow(t *testing.T, cfg Config, a, b time.Duration) {
	t.Helper()
	wa, wb := cfg.BurstWindow(a), cfg.BurstWindow(b)
	if wa > wb {
		t.Fatalf("window %s after a sync of %s, but %s after a longer one of %s", wa, a, wb, b)
	}
	if lo := min(cfg.Window, cfg.MaxDelay); wa < lo || wb > cfg.MaxDelay {
		t.Fatalf("windows %s and %s outside %s..%s", wa, wb, lo, cfg.MaxDelay)
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
