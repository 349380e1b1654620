package mcsbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/lightset"
)

// comebackTable reports each run's comebacks, one row each.
func comebackTable(runs []*fleetResult) bench.Table {
	t := bench.Table{
		Caption: "Comebacks on light members: the broker back after an outage with changes queued, one member's API server restarted",
		Header: []string{"Members x exported Services", "Comeback", "API server stop -> serving", "Timed", "Time (x floor)", "Floor",
			"Writes besides Lease renewals", "Lease renewals", "Writes beyond what the changes require"},
	}
	for _, r := range runs {
		size := fmt.Sprintf("%d x %s", r.Members, bench.Count(int64(r.Services)))
		ids := memberIDs(r.Members)
		b, m := r.BrokerComeback, r.MemberRestart
		t.Rows = append(t.Rows, []string{
			size, fmt.Sprintf("broker down, %d endpoint changes made in the members meanwhile", b.Changes),
			b.Down.Round(100 * time.Millisecond).String(), "broker started -> every member imports every change",
			versusFloor(b.Took, b.Floor),
			fmt.Sprintf("the broker's restart with no manager running (%s) plus the write floor of the %d broker and %d member slice updates the changes require, plain clients",
				r.BrokerRestart.Round(100*time.Millisecond), b.Changes, b.Changes*r.Members),
			clusterTotals(ids, b.Writes), fmt.Sprint(b.LeaseWrites), clusterWrites(ids, unexpected(b.Writes, b.Expected)),
		}, []string{
			size, fmt.Sprintf("%s's kube-apiserver restarted, nothing changed; %d endpoint change made once it served", ids[0], m.Changes),
			m.Down.Round(100 * time.Millisecond).String(), "stop -> the change made in " + ids[0] + " arrived in every member",
			versusFloor(m.Took, m.Floor),
			fmt.Sprintf("not a write floor (nothing changed): the restart with no manager running (%s) plus the p50 single change",
				r.APIServerRestart.Round(100*time.Millisecond)),
			clusterTotals(ids, m.Writes), fmt.Sprint(m.LeaseWrites), clusterWrites(ids, unexpected(m.Writes, m.Expected)),
		})
	}
	return t
}

// comebackChecks are the comebacks' invariants: no write for an object that did not change, at
// every size, and at full size their times within floorBound of their floors.
func comebackChecks(r *fleetResult, size string) []bench.Check {
	ids := memberIDs(r.Members)
	broker := bench.Check{Name: fmt.Sprintf("%s: the broker coming back with %d changes queued writes nothing for objects that did not change (Lease renewals aside)", size, r.BrokerComeback.Changes)}
	member := bench.Check{Name: fmt.Sprintf("%s: one member's API server restarting with nothing changed writes nothing but Lease renewals (besides the single change made afterwards)", size)}
	for _, c := range []*bench.Check{&broker, &member} {
		res := r.BrokerComeback
		if c == &member {
			res = r.MemberRestart
		}
		switch extra := unexpected(res.Writes, res.Expected); {
		case len(res.Writes) == 0:
			c.Failure = "no writes were counted"
		case anyWrites(extra):
			c.Failure = "beyond what the changes require: " + clusterWrites(ids, extra)
		}
	}
	checks := []bench.Check{broker, member}
	if r.Services >= fullFleetServices {
		checks = append(checks,
			boundCheck(size+": the broker's comeback", "its restart with no manager plus the write floor of its changes, measured in the same run", r.BrokerComeback.Took, r.BrokerComeback.Floor),
			boundCheck(size+": a member's API server restart", "its restart with no manager plus one single change, measured in the same run", r.MemberRestart.Took, r.MemberRestart.Floor))
	}
	return checks
}

func memberIDs(members int) []string {
	ids := []string{}
	for i := range members {
		ids = append(ids, lightset.MemberID(i))
	}
	return ids
}

// unexpected is, per API server, actual minus expected by resource and verb, differences of
// zero left out: positive counts are writes the changes did not require, negative ones writes
// they required that were not made.
func unexpected(actual, expected []apimetrics.Writes) []apimetrics.Writes {
	out := make([]apimetrics.Writes, len(actual))
	for i, w := range actual {
		diff := map[apimetrics.Write]int{}
		for k, n := range w.Served {
			diff[k] += n
		}
		if i < len(expected) {
			for k, n := range expected[i].Served {
				diff[k] -= n
			}
		}
		for k, n := range diff {
			if n == 0 {
				delete(diff, k)
			}
		}
		out[i] = apimetrics.Writes{Served: diff, Conflicts: w.Conflicts}
	}
	return out
}

func anyWrites(ws []apimetrics.Writes) bool {
	return slices.ContainsFunc(ws, func(w apimetrics.Writes) bool { return len(w.Served) > 0 })
}

// writeList reads "endpointslices update 10, events create 2 (1 refused with 409)", or "none".
func writeList(w apimetrics.Writes) string {
	var parts []string
	for k, n := range w.Served {
		part := fmt.Sprintf("%s %s %d", k.Resource, k.Verb, n)
		if c := w.Conflicts[k]; c > 0 {
			part += fmt.Sprintf(" (%d refused with 409)", c)
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// clusterWrites lists the writes of each API server that has any (broker first), or "none".
func clusterWrites(ids []string, ws []apimetrics.Writes) string {
	var parts []string
	for i, w := range ws {
		if len(w.Served) > 0 {
			parts = append(parts, clusterName(ids, i)+": "+writeList(w))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// clusterTotals reads "broker 10, member-00 14, member-01 13".
func clusterTotals(ids []string, ws []apimetrics.Writes) string {
	var parts []string
	for i, w := range ws {
		parts = append(parts, fmt.Sprintf("%s %d", clusterName(ids, i), w.Total()))
	}
	return strings.Join(parts, ", ")
}

// clusterName names the API server of a write snapshot's index: the broker first.
func clusterName(ids []string, i int) string {
	switch {
	case i == 0:
		return lightset.BrokerName
	case i <= len(ids):
		return ids[i-1]
	}
	return fmt.Sprintf("cluster %d", i)
}

// comebackNote says how the comebacks were run and counted; r gives the outage and the API
// servers' own writes while starting.
func comebackNote(r *fleetResult) string {
	return fmt.Sprintf("Comebacks, after the join: the broker's kube-apiserver stopped for %s (its etcd keeps the data) while "+
		"endpoint changes are made in the members, then started again with the same command line; then the first member's "+
		"kube-apiserver stopped and started again with nothing changed, and one change made in that member as soon as it "+
		"serves. A kube-apiserver with watches open does not exit on SIGTERM before its own one-minute shutdown timeout, so "+
		"it is killed 3 s after SIGTERM. Writes are counted at every API server from just before the stop until no write "+
		"other than a Lease renewal came for the larger of 15 s and a lease duration and a third (the grace peers get after "+
		"an outage); a restarted API server's counters begin again at zero, so all it counted since its start is added. "+
		"What the changes require: per change one update of the bench's slice in its member, of its copy in the broker and "+
		"of the imported slice in every member (each imports its own exports too), plus the restarted API server's own "+
		"writes while starting, measured when it restarted before any manager ran (broker: %s; %s: %s; the `kubernetes` "+
		"Service's endpoints); anything else, or fewer, is listed, 409s included. The broker's comeback is timed from "+
		"its start, since the managers write to it before its readiness check passes, to the last change's arrival as the "+
		"members' watches saw it (the readiness check, in the stop -> serving column, may pass later: its bootstrap hooks "+
		"run slowly while the members write), against its own restart with no manager running plus the write floor of "+
		"the changes. The member restart has no write floor, "+
		"since nothing changed: its floor is the same API server's restart measured before any manager ran plus the p50 "+
		"single change of the propagation phase; its time ends when the change made in the member arrived everywhere, "+
		"which takes its manager's caches of its own API server watching again. Its Lease lives in the broker and is "+
		"renewed through the restart: a lapse would withdraw the member's endpoints, which the writes would show.", r.Outage, writeList(r.BrokerComeback.OwnStart), lightset.MemberID(0), writeList(r.MemberRestart.OwnStart))
}
