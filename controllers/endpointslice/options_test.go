package endpointslice

import (
	"testing"
	"time"
)

func TestCoalesceBudgetIsOffWithABatchPeriod(t *testing.T) {
	o := DefaultOptions()
	if coalesceBudget(o) != DefaultCoalesceBudget {
		t.Fatalf("default budget %s, want %s", coalesceBudget(o), DefaultCoalesceBudget)
	}
	o.BatchPeriod = time.Second
	if coalesceBudget(o) != 0 {
		t.Fatalf("a batch period should turn coalescing off, budget %s", coalesceBudget(o))
	}
}

func TestOptionsRefuseCoalescingThatCannotWork(t *testing.T) {
	for _, bad := range []func(*Options){
		func(o *Options) { o.CoalesceQuiet = -time.Millisecond },
		func(o *Options) { o.CoalesceBudget = -time.Millisecond },
		func(o *Options) { o.CoalesceQuiet, o.CoalesceBudget = time.Second, 100*time.Millisecond },
	} {
		o := DefaultOptions()
		bad(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("quiet %s budget %s accepted", o.CoalesceQuiet, o.CoalesceBudget)
		}
	}
	o := DefaultOptions()
	o.CoalesceQuiet, o.CoalesceBudget = time.Second, 0
	if err := o.Validate(); err != nil {
		t.Errorf("coalescing off with a quiet period refused: %v", err)
	}
}
