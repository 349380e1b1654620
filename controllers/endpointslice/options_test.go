package endpointslice

import (
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/coalesce"
)

func TestCoalescingIsOffWithABatchPeriod(t *testing.T) {
	o := DefaultOptions()
	want := coalesce.Config{Quiet: DefaultCoalesceQuiet, Window: DefaultCoalesceWindow, MaxDelay: DefaultCoalesceBudget}
	if got := o.CoalesceConfig(); got != want {
		t.Fatalf("default coalescing %+v, want %+v", got, want)
	}
	o.BatchPeriod = time.Second
	if coalesce.New(o.CoalesceConfig()).Enabled() {
		t.Fatalf("a batch period should turn coalescing off, got %+v", o.CoalesceConfig())
	}
}

func TestOptionsRefuseCoalescingThatCannotWork(t *testing.T) {
	for _, bad := range []func(*Options){
		func(o *Options) { o.CoalesceQuiet = -time.Millisecond },
		func(o *Options) { o.CoalesceBudget = -time.Millisecond },
		func(o *Options) { o.CoalesceWindow = -time.Millisecond },
		func(o *Options) { o.CoalesceWindow = 0 },
		func(o *Options) { o.CoalesceQuiet, o.CoalesceBudget = time.Second, 100*time.Millisecond },
	} {
		o := DefaultOptions()
		bad(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("quiet %s window %s budget %s accepted", o.CoalesceQuiet, o.CoalesceWindow, o.CoalesceBudget)
		}
	}
	o := DefaultOptions()
	o.CoalesceQuiet, o.CoalesceBudget = time.Second, 0
	if err := o.Validate(); err != nil {
		t.Errorf("coalescing off with a quiet period refused: %v", err)
	}
	// Lowering the max delay alone must work: the default window is cut to it.
	o = DefaultOptions()
	o.CoalesceBudget = 150 * time.Millisecond
	if err := o.Validate(); err != nil {
		t.Errorf("a max delay below the default window refused: %v", err)
	}
	if w := o.CoalesceConfig().BurstWindow(time.Hour); w != o.CoalesceBudget {
		t.Errorf("window %s with max delay %s", w, o.CoalesceBudget)
	}
}
