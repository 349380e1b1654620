package agentbench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// runPart runs the part as `fleetslice bench agent --quick` would, with args on its flags.
func runPart(t *testing.T, quick bool, args ...string) (*bench.Report, string) {
	t.Helper()
	p := Part()
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	p.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rep, err := p.Run(context.Background(), bench.Env{Quick: quick, Log: &log})
	if err != nil {
		t.Fatalf("agent part: %v\nlog:\n%s", err, log.String())
	}
	return rep, log.String()
}

// checkQuickReport asserts what the bench's own test asserts of every part, and that every
// measurement of every size is there.
func checkQuickReport(t *testing.T, rep *bench.Report, dataplane string, sizes int) {
	t.Helper()
	if len(rep.Tables) != 2 {
		t.Fatalf("%d tables, want cold and later", len(rep.Tables))
	}
	if got := len(rep.Tables[0].Rows); got != sizes {
		t.Errorf("cold table has %d rows for %d sizes", got, sizes)
	}
	if got, want := len(rep.Tables[1].Rows), sizes*5; got != want {
		t.Errorf("later table has %d rows, want %d", got, want)
	}
	for _, tab := range rep.Tables {
		for _, row := range tab.Rows {
			if len(row) != len(tab.Header) {
				t.Errorf("table %q: row %v has %d cells for %d columns", tab.Caption, row, len(row), len(tab.Header))
			}
			if row[0] == "" || row[2] != dataplane {
				t.Errorf("table %q: row %v lacks its size or says another dataplane than %s", tab.Caption, row, dataplane)
			}
			for _, cell := range row {
				if cell == "" || strings.Contains(cell, "NaN") || strings.Contains(cell, "Inf") {
					t.Errorf("table %q: row %v has cell %q", tab.Caption, row, cell)
				}
			}
		}
	}
	// Two table checks per size, besides the sync and Stats checks.
	if got, want := len(rep.Checks), 2+2*sizes; got != want {
		t.Errorf("%d checks, want %d", got, want)
	}
	for _, c := range rep.Checks {
		if !c.Passed() {
			t.Errorf("invariant broken: %s: %s", c.Name, c.Failure)
		}
	}
	if !strings.Contains(rep.Intro, "**"+dataplane+"**") {
		t.Errorf("intro does not say the dataplane is %s:\n%s", dataplane, rep.Intro)
	}
}

func TestQuickDryRun(t *testing.T) {
	rep, _ := runPart(t, true, "--agent-dataplane=dry-run")
	checkQuickReport(t, rep, DryRun, len(QuickSizes))
}

// TestQuickNftables runs the part on the real kernel, inside a throwaway network namespace.
func TestQuickNftables(t *testing.T) {
	requireKernel(t)
	before := namespaces(t)
	rep, log := runPart(t, true, "--agent-dataplane=nftables", "--agent-sizes=100,300")
	checkQuickReport(t, rep, Nftables, 2)
	if !strings.Contains(log, "agent dataplane: nftables") {
		t.Errorf("log does not name the dataplane:\n%s", log)
	}
	if after := namespaces(t); after != before {
		t.Errorf("network namespaces before the run %q, after %q: the run left one behind", before, after)
	}
}

func namespaces(t *testing.T) string {
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "fsbench-") {
			names = append(names, e.Name())
		}
	}
	return strings.Join(names, ",")
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--agent-dataplane=iptables"},
		{"--agent-dataplane=dry-run", "--agent-sizes=0"},
		{"--agent-dataplane=dry-run", "--agent-endpoints=0"},
	} {
		p := Part()
		fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
		p.Flags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Run(context.Background(), bench.Env{Quick: true}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestRunnerWritesThePart runs the part through the bench runner, as `fleetslice bench agent
// --quick` does, and reads the document it writes.
func TestRunnerWritesThePart(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "benchmarks.md")
	p := Part()
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	p.Flags(fs)
	if err := fs.Parse([]string{"--agent-dataplane=dry-run", "--agent-sizes=50"}); err != nil {
		t.Fatal(err)
	}
	results, err := bench.Run(context.Background(), bench.Config{Parts: []bench.Part{p}, Quick: true, Output: doc,
		Invocation: "fleetslice bench agent --quick"})
	if err != nil {
		t.Fatal(err)
	}
	if failed := results[0].FailedChecks(); len(failed) > 0 {
		t.Errorf("failed checks: %v", failed)
	}
	written, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<!-- bench:begin agent -->", "Node agent: nftables sync times", "| 50 | one Service added | dry-run |"} {
		if !strings.Contains(string(written), want) {
			t.Errorf("document lacks %q:\n%s", want, written)
		}
	}
}
