package mcsbench

import (
	"strings"
	"testing"

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
		want string
	}{
		{name: "the least"},
		{name: "a second ServiceImport write", add: map[int]apimetrics.Write{1: {Resource: "serviceimports", Verb: "update"}}, want: "member-01 8.00 per import"},
		{name: "an Event per import", add: map[int]apimetrics.Write{2: {Resource: "events", Verb: "create"}}, want: "member-02 8.00 per import"},
		{name: "export status twice", add: map[int]apimetrics.Write{0: {Resource: "serviceexports/status", Verb: "update"}}, want: "member-00 2.00 per export"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &fleetResult{Members: 3, Services: services, BulkWrites: []apimetrics.Writes{{Served: map[apimetrics.Write]int{}}}}
			for m := range 3 {
				w := memberBulkWrites(services)
				if extra, ok := tc.add[m]; ok {
					w.Served[extra] += services
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
