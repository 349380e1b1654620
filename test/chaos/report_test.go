package chaos

import (
	"fmt"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
)

// row is one fault's line in docs/reliability.md.
type row struct {
	Fault    string
	Injected string
	// Converged is from the end of the fault (the process back, the network restored) until
	// every invariant held.
	Converged time.Duration
	// Writes are fleetslice's writes from the fault's start until it converged, Leases left out.
	Writes writes
	// Lost and Duplicated are the steady Service's endpoints seen missing or listed twice at any
	// moment, and the rolled Service's at the end.
	Lost, Duplicated int
	// Note holds what else was measured (a hand-over time, injected failures).
	Note string
	// Focus picks the fault's spec alone: go test ./test/chaos/ -ginkgo.focus "<Focus>".
	Focus string
}

// restartsReported is how many unexpected manager restarts earlier rows have reported.
var restartsReported int

// record adds the fault's row and prints it. A manager that exited on its own since the last row
// (and was started again by its supervisor) is named in the row.
func record(r row) {
	restarts := 0
	for _, m := range fleet {
		for _, rep := range m.replicas {
			restarts += rep.unexpectedRestarts()
		}
	}
	if n := restarts - restartsReported; n > 0 {
		r.Note = strings.TrimPrefix(r.Note+fmt.Sprintf("; %d manager exit(s) not caused by the test, restarted as a kubelet would", n), "; ")
	}
	restartsReported = restarts
	words := strings.Fields(CurrentSpecReport().LeafNodeText)
	r.Focus = strings.Join(words[:min(len(words), 5)], " ")
	rows = append(rows, r)
	AddReportEntry(r.Fault, r.line())
	fmt.Fprintln(GinkgoWriter, r.line())
}

func (r row) line() string {
	return fmt.Sprintf("| %s | %s | %s | %d (member %d, broker %d) | %d | %d | %s | `-ginkgo.focus \"%s\"` |",
		r.Fault, r.Injected, r.Converged.Round(100*time.Millisecond), r.Writes.total(),
		r.Writes.api.Writes("leases"), r.Writes.broker.Writes("leases"), r.Lost, r.Duplicated, r.Note, r.Focus)
}

// writeReport writes the rows as a markdown table to $FLEETSLICE_CHAOS_REPORT when it is set
// (make chaos sets it), so that docs/reliability.md can quote a run.
func writeReport(rows []row) {
	path := os.Getenv("FLEETSLICE_CHAOS_REPORT")
	if path == "" || len(rows) == 0 {
		return
	}
	var b strings.Builder
	variant := "quick"
	if size.RolloutPods == full.RolloutPods {
		variant = "full"
	}
	fmt.Fprintf(&b, "Variant: %s (rollout of %d Pods, broker outage %s, cluster lease %s), %s.\n\n",
		variant, size.RolloutPods, size.BrokerOutage, size.Lease, time.Now().UTC().Format("2006-01-02"))
	b.WriteString("| fault | injected | converged | writes | lost | duplicated | also measured | reproduce (`make chaos`, or `go test ./test/chaos/` with) |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString(r.line() + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintf(GinkgoWriter, "writing %s: %v\n", path, err)
	}
}
