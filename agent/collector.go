package agent

import "runtime/debug"

// DefaultFullSyncGCPercent is the collector's GOGC while a full sync runs (Options.FullSyncGCPercent).
//
// A full sync is the agent's largest moment: it reads every Service, renders the whole table and
// holds the netlink batch the kernel takes in one message, which at 5,000 Services of 50
// endpoints is about 60 MB live beside the informer cache. Go lets the heap grow to twice what
// was live after the last collection (GOGC=100) before collecting again, so that moment sets the
// agent's peak resident memory, which a DaemonSet pays on every node. At 25 the heap grows by a
// quarter instead; the collector runs about four times as often, during a sync that comes once
// at start and once a --sync-period (see docs/agent.md, Memory).
const DefaultFullSyncGCPercent = 25

// lowerCollectorGoal runs the collector at percent until the returned func is called, unless it
// already runs at that or below (or is off: GOGC=off): an operator's own GOGC is never raised.
func lowerCollectorGoal(percent int) (restore func()) {
	if percent <= 0 {
		return func() {}
	}
	prev := debug.SetGCPercent(percent)
	if prev <= percent { // GOGC=off is -1: below any percent
		debug.SetGCPercent(prev)
		return func() {}
	}
	return func() { debug.SetGCPercent(prev) }
}
