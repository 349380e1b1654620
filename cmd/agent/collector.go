package main

import (
	"runtime/debug"
	"runtime/metrics"
)

// defaultGCPercent is the agent's GOGC (--gc-percent) unless the operator set a lower one.
//
// The agent runs as a DaemonSet, so its peak resident memory is paid on every node. Go lets the
// heap grow to twice what the last collection found live (GOGC=100) before collecting again. A
// full sync (at start and every --sync-period) holds the informer cache, the Syncer's records
// and the netlink batch at once, and between syncs the heap grew to twice what the sync had
// left live: at 5,000 Services of 50 endpoints the heap reached 248 MB after a periodic full
// resync for 89 MB live. At 25 it grows by a quarter instead. The collector runs about four
// times as often, which between syncs, where the agent allocates little, costs little; during
// full syncs the agent allocates little per element for that reason (see docs/agent.md,
// Memory).
const defaultGCPercent = 25

// lowerCollectorGoal runs the collector at percent for the rest of the process's life, unless it
// already runs at that or below (or is off: GOGC=off): an operator's own GOGC is never raised.
// 0 leaves it alone.
func lowerCollectorGoal(percent int) {
	if percent <= 0 {
		return
	}
	if prev := debug.SetGCPercent(percent); prev <= percent { // GOGC=off is -1: below any percent
		debug.SetGCPercent(prev)
	}
}

// collectorGoal is the process's GOGC (-1: off).
func collectorGoal() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64()) // off reads as the largest uint64
}
