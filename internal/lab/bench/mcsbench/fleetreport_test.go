package mcsbench

import (
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
)

// memberBulkWrites is what one member of a 3-member set writes for services imports at the
// least: three slices, the derived Service, its IPAddress, the ServiceImport and its status,
// and its own export's status, plus a few Lease renewals.
func memberBulkWrites(services int) apimetrics.Writes {
	return apimetrics.Writes{Served: map[apimetrics.Write]int{
		{Resource: "endpointslices", Verb: "create"}:        3 * services,
		{Resource: "services", Verb: "create"}:              services,
		{Resource: "ipaddresses", Verb: "create"}:           services,
		{Resource: "serviceimports", Verb: "create"}:        services,
		{Resource: "serviceimports/status", Verb: "update"}: services,
		{Resource: "serviceexports/status", Verb: "update"}: services,
		{Resource: "leases", Verb: "update"}:                12,
	}}
}

func TestWritesCheckHoldsEveryMemberToItsImportsAndExports(t *testing.T) {
	const services = 100
	tests := []struct {
		name string
		add  map[int]apimetrics.Write // member index -> one more write of this kind per Service
		// others are Event writes by the API server's own controllers, per member; refused
		// its allocator's IPAddress creates refused with 409.
		others, refused map[int]int
		// addRefused has the API server refuse the added writes with 409.
		addRefused bool
		want       string
	}{
		{name: "the least"},
		{name: "a second ServiceImport write", add: map[int]apimetrics.Write{1: {Resource: "serviceimports", Verb: "update"}}, want: "member-01 8.00 per import"},
		{name: "an Event per import", add: map[int]apimetrics.Write{2: {Resource: "events", Verb: "create"}}, want: "member-02 8.00 per import"},
		{name: "the API server's own Events", add: map[int]apimetrics.Write{2: {Resource: "events", Verb: "create"}}, others: map[int]int{2: services}},
		{name: "ours beside the API server's", add: map[int]apimetrics.Write{2: {Resource: "events", Verb: "create"}}, others: map[int]int{2: services / 2}, want: "member-02 7.50 per import"},
		{name: "the API server's allocator retrying an address", refused: map[int]int{1: services / 10}},
		{name: "fleetslice's refused writes count", add: map[int]apimetrics.Write{1: {Resource: "serviceimports/status", Verb: "update"}}, addRefused: true, want: "member-01 8.00 per import"},
		{name: "export status twice", add: map[int]apimetrics.Write{0: {Resource: "serviceexports/status", Verb: "update"}}, want: "member-00 2.00 per export"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &fleetResult{Members: 3, Services: services, BulkWrites: []apimetrics.Writes{{Served: map[apimetrics.Write]int{}}}, OthersEvents: []int{0}}
			for m := range 3 {
				r.OthersEvents = append(r.OthersEvents, tc.others[m])
				w := memberBulkWrites(services)
				w.Conflicts = map[apimetrics.Write]int{}
				if extra, ok := tc.add[m]; ok {
					w.Served[extra] += services
					if tc.addRefused {
						w.Conflicts[extra] += services
					}
				}
				if n := tc.refused[m]; n > 0 {
					ip := apimetrics.Write{Resource: "ipaddresses", Verb: "create"}
					w.Served[ip] += n
					w.Conflicts[ip] += n
				}
				r.BulkWrites = append(r.BulkWrites, w)
			}
			c := writesCheck(r, "3 x 100")
			if tc.want == "" && !c.Passed() || tc.want != "" && (c.Passed() || !strings.Contains(c.Failure, tc.want)) {
				t.Fatalf("check %q failure %q, want %q", c.Name, c.Failure, tc.want)
			}
		})
	}
}

func TestSplitWritesSetsLeasesAndExportStatusApart(t *testing.T) {
	imports, exports, leases := splitWrites(memberBulkWrites(10))
	if imports != 70 || exports != 10 || leases != 12 {
		t.Fatalf("split = %d imports, %d exports, %d leases; want 70, 10, 12", imports, exports, leases)
	}
}

func TestEventWritesCountEveryRepeat(t *testing.T) {
	for _, tc := range []struct {
		count  int32
		series *eventsv1.EventSeries
		want   int
	}{{0, nil, 1}, {1, nil, 1}, {4, nil, 4}, {0, &eventsv1.EventSeries{Count: 3}, 3}} {
		if got := eventWrites(tc.count, tc.series); got != tc.want {
			t.Errorf("eventWrites(%d, %v) = %d, want %d", tc.count, tc.series, got, tc.want)
		}
	}
}
