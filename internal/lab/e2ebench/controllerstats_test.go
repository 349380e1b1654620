package e2ebench

import (
	"testing"
	"time"
)

func TestControllerStatsSubAndAdd(t *testing.T) {
	before := ControllerStats{Syncs: 10, Stale: 1, Queued: 40, Deferred: 2, SlicesChanged: 12, LimiterWait: time.Second, LimitedRequests: 20, Unchanged: 3, WorkTime: time.Second}
	after := ControllerStats{Syncs: 25, Stale: 3, Queued: 90, Deferred: 7, SlicesChanged: 30, LimiterWait: 3 * time.Second, LimitedRequests: 50, Unchanged: 5, WorkTime: 4 * time.Second}
	d := after.Sub(before)
	want := ControllerStats{Syncs: 15, Stale: 2, Queued: 50, Deferred: 5, SlicesChanged: 18, LimiterWait: 2 * time.Second, LimitedRequests: 30, Unchanged: 2, WorkTime: 3 * time.Second}
	if d != want {
		t.Fatalf("Sub = %+v, want %+v", d, want)
	}
	if sum := (ControllerStats{}).Add(d).Add(d); sum.Syncs != 30 || sum.LimiterWait != 4*time.Second || sum.Unchanged != 4 {
		t.Fatalf("Add = %+v", sum)
	}
	unknown := ControllerStats{Syncs: 5, Unchanged: -1}
	if got := unknown.Sub(ControllerStats{Syncs: 1, Unchanged: -1}); got.Unchanged != -1 || got.Syncs != 4 {
		t.Fatalf("an unexposed count must stay unknown through Sub: %+v", got)
	}
	if got := (ControllerStats{}).Add(unknown); got.Unchanged != -1 {
		t.Fatalf("an unexposed count must stay unknown through Add: %+v", got)
	}
}
