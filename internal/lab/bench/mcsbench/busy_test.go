package mcsbench

import "testing"

func TestCPUTicksCountBusyWithinTotal(t *testing.T) {
	busy, total, err := cpuTicks()
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	if total <= 0 || busy < 0 || busy > total {
		t.Fatalf("busy %d of %d ticks", busy, total)
	}
}
