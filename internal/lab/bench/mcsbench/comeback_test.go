package mcsbench

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/lightset"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

func threeMembers(services int) *fleet {
	set := &lightset.Set{Members: make([]*testenv.Cluster, 3)}
	for i := range set.Members {
		set.IDs = append(set.IDs, lightset.MemberID(i))
	}
	return &fleet{o: fleetOptions{services: services}, set: set}
}

func TestComebackChangesSpreadOverMembersAndSpareTheLastService(t *testing.T) {
	f := threeMembers(4)
	changes, err := f.comebackChanges(7)
	if err != nil {
		t.Fatal(err)
	}
	if changes[0] != (fleetChange{0, 0}) || changes[4] != (fleetChange{1, 1}) || changes[6] != (fleetChange{0, 2}) {
		t.Fatalf("changes = %v", changes)
	}
	if _, err := f.comebackChanges(10); err == nil {
		t.Fatal("10 changes over 3 members would change the last of 4 Services")
	}
}

func TestExpectedWritesOfChanges(t *testing.T) {
	f := threeMembers(30)
	got := f.expectedWrites([]fleetChange{{0, 0}, {0, 1}, {2, 0}})
	update := apimetrics.Write{Resource: "endpointslices", Verb: "update"}
	// broker: one copy per change; member: one imported slice per change plus its own changes.
	for i, want := range []int{3, 5, 3, 4} {
		if got[i].Served[update] != want || got[i].Total() != want {
			t.Errorf("API server %d: %v, want %d slice updates", i, got[i].Served, want)
		}
	}
}

func TestComebackChecksNameWritesForUnchangedObjects(t *testing.T) {
	f := threeMembers(30)
	expected := f.expectedWrites([]fleetChange{{0, 29}})
	withEvent := f.expectedWrites([]fleetChange{{0, 29}})
	withEvent[2].Served[apimetrics.Write{Resource: "events", Verb: "create"}] = 2
	delete(withEvent[0].Served, apimetrics.Write{Resource: "endpointslices", Verb: "update"})
	r := &fleetResult{Members: 3, Services: 30,
		BrokerComeback: comeback{Changes: 1, Writes: expected, Expected: expected, Took: time.Second, Floor: time.Second},
		MemberRestart:  comeback{Changes: 1, Writes: withEvent, Expected: expected},
	}
	checks := comebackChecks(r, "3 members x 30 Services")
	if len(checks) != 2 || !checks[0].Passed() {
		t.Fatalf("checks %+v: want 2, the broker's passing", checks)
	}
	if f := checks[1].Failure; !strings.Contains(f, "broker: endpointslices update -1") || !strings.Contains(f, "member-01: events create 2") {
		t.Fatalf("member restart failure %q does not name the missing and the extra writes", f)
	}
	table := comebackTable([]*fleetResult{r})
	if len(table.Rows) != 2 || table.Rows[0][len(table.Header)-1] != "none" || table.Rows[0][4] != "1s (1.00x of 1s)" {
		t.Fatalf("comeback rows = %v", table.Rows)
	}
}

// A comeback is timed to the last change's first arrival in any member, as the watches saw it,
// not to when the bench looked: the broker's readiness check, which the bench waits for first,
// may pass after every member has imported every change.
func TestComebackIsTimedToTheLastArrival(t *testing.T) {
	f := threeMembers(4)
	f.views = []*memberView{newMemberView(), newMemberView(), newMemberView()}
	changes := []fleetChange{{0, 0}, {1, 1}}
	start := time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)
	for m, v := range f.views {
		for i, c := range changes {
			key := arrivalKey(fleetService(c.service), f.set.IDs[c.member], memberAddress(c.member, c.service, comebackAddress))
			v.firstReady[key] = start.Add(time.Duration(10*m+i) * time.Second)
		}
	}
	if got, want := f.lastArrival(changes, f.others()), start.Add(21*time.Second); !got.Equal(want) {
		t.Fatalf("last arrival %v, want %v (the second change in the third member)", got, want)
	}
	if got, want := f.lastArrival(changes, []int{0, 1}), start.Add(11*time.Second); !got.Equal(want) {
		t.Fatalf("last arrival in the first two members %v, want %v", got, want)
	}
	delete(f.views[2].firstReady, arrivalKey(fleetService(1), f.set.IDs[1], memberAddress(1, 1, comebackAddress)))
	if missing, last := f.arrivals(changes, f.others()); missing != 1 || !last.Equal(start.Add(20*time.Second)) {
		t.Fatalf("with one change not arrived in the third member: %d missing, last %v; want 1, %v", missing, last, start.Add(20*time.Second))
	}
}
