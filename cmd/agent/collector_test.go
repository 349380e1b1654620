package main

import (
	"runtime/debug"
	"testing"
)

// The agent lowers the process's GOGC to --gc-percent, never raises an operator's lower one
// (GOGC=off included), leaves it alone at 0, and puts the process's own back when asked.
func TestLowerCollectorGoal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name          string
		own, percent  int
		while, after_ int
	}{
		{"Go's default lowered", 100, defaultGCPercent, defaultGCPercent, 100},
		{"an operator's lower GOGC kept", 10, defaultGCPercent, 10, 10},
		{"GOGC=off kept", -1, defaultGCPercent, -1, -1},
		{"the same value", 25, 25, 25, 25},
		{"0 leaves it alone", 100, 0, 100, 100},
	} {
		debug.SetGCPercent(tc.own)
		restore := lowerCollectorGoal(tc.percent)
		if got := debug.SetGCPercent(tc.while); got != tc.while {
			t.Errorf("%s: GOGC %d while lowered, want %d", tc.name, got, tc.while)
		}
		restore()
		if got := debug.SetGCPercent(tc.after_); got != tc.after_ {
			t.Errorf("%s: GOGC %d after restore, want %d", tc.name, got, tc.after_)
		}
	}
}
