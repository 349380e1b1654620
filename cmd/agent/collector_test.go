package main

import (
	"runtime/debug"
	"testing"
)

// The agent lowers the process's GOGC to --gc-percent, never raises an operator's lower one
// (GOGC=off included), and leaves it alone at 0.
func TestLowerCollectorGoal(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name              string
		own, percent, got int
	}{
		{"Go's default lowered", 100, defaultGCPercent, defaultGCPercent},
		{"an operator's lower GOGC kept", 10, defaultGCPercent, 10},
		{"GOGC=off kept", -1, defaultGCPercent, -1},
		{"the same value", 25, 25, 25},
		{"0 leaves it alone", 100, 0, 100},
	} {
		debug.SetGCPercent(tc.own)
		lowerCollectorGoal(tc.percent)
		if got := collectorGoal(); got != tc.got {
			t.Errorf("%s: GOGC %d, want %d", tc.name, got, tc.got)
		}
	}
}
