package mcsbench

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

func sampleRun(missing int, withdrawals ...e2ebench.Withdrawal) run {
	return run{services: 100, samples: 2, result: &e2ebench.MCSResult{
		Propagation: &e2ebench.Propagation{
			FromWatch:     []time.Duration{20 * time.Millisecond, 40 * time.Millisecond},
			FromCondition: []time.Duration{500 * time.Millisecond, 900 * time.Millisecond},
			Missing:       missing,
		},
		Lost:        "cluster-3",
		Withdrawals: withdrawals,
	}}
}

func TestChecksFlagBrokenResults(t *testing.T) {
	good := e2ebench.Withdrawal{Member: "cluster-1", SlicesBefore: 100, FirstAfterExpiry: time.Second, AfterExpiry: 2 * time.Second}
	tests := []struct {
		name string
		run  run
		want string
	}{
		{"sane", sampleRun(0, good), ""},
		{"a pair never arrived", sampleRun(1, good), "1 missing"},
		{"withdrawn before expiry", sampleRun(0, e2ebench.Withdrawal{Member: "cluster-2", SlicesBefore: 5, FirstAfterExpiry: -time.Second}), "before the Lease expired"},
		{"nothing imported to withdraw", sampleRun(0, e2ebench.Withdrawal{Member: "cluster-2"}), "imported no slice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var failed []string
			for _, c := range checks(tc.run) {
				if !c.Passed() {
					failed = append(failed, c.Failure)
				}
			}
			if tc.want == "" && len(failed) != 0 || tc.want != "" && (len(failed) != 1 || !strings.Contains(failed[0], tc.want)) {
				t.Fatalf("failures %v, want %q", failed, tc.want)
			}
		})
	}
}

func TestReportTables(t *testing.T) {
	o := &settings{clusters: 3, changeEvery: 200 * time.Millisecond}
	r := o.report(9, 10*time.Second, []run{sampleRun(0, e2ebench.Withdrawal{Member: "cluster-1", SlicesBefore: 100, FirstAfterExpiry: time.Second, AfterExpiry: 3 * time.Second})}, nil)
	prop := r.Tables[0].Rows[0]
	if prop[0] != "100" || prop[1] != "2" || prop[4] != "20 ms" || prop[6] != "40 ms" || prop[9] != "900 ms" {
		t.Fatalf("propagation row = %v", prop)
	}
	if w := r.Tables[1].Rows[0]; w[1] != "cluster-1 (lost: cluster-3)" || w[4] != "3000 ms" {
		t.Fatalf("withdrawal row = %v", w)
	}
}

// The managers' logs are kept where asked, one folder per size so that a run of several sizes
// keeps them all, and beside the profiles when only those are asked for.
func TestManagerLogsAreKeptWhereAsked(t *testing.T) {
	for _, c := range []struct {
		o    fleetOptions
		want string
	}{
		{fleetOptions{members: 3, services: 1000}, ""},
		{fleetOptions{members: 3, services: 1000, profileDir: "/p"}, "/p/logs"},
		{fleetOptions{members: 10, services: 1000, logsDir: "/l"}, "/l/10x1000"},
		{fleetOptions{members: 10, services: 1000, logsDir: "/l", profileDir: "/p"}, "/l/10x1000"},
	} {
		if got := c.o.keptLogs(); got != c.want {
			t.Errorf("%+v: logs kept in %q, want %q", c.o, got, c.want)
		}
	}
}
