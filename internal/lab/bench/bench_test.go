package bench_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/datapathbench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/parts"
)

// TestQuickBenchOfEveryPart runs `fleetslice bench --all --quick` in process, so the bench never
// rots: every registered part must produce sane tables and pictures, and every invariant it checks
// while measuring must hold. No timing is asserted.
func TestQuickBenchOfEveryPart(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	dir := t.TempDir()
	doc := filepath.Join(dir, "docs", "benchmarks.md")
	// A section of a part this run does not know must survive the rewrite.
	if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := "<!-- bench:begin someone-else -->\n## kept\n<!-- bench:end someone-else -->\n"
	if err := os.WriteFile(doc, []byte("# old\n\n"+foreign), 0o644); err != nil {
		t.Fatal(err)
	}
	all := runnableParts(t)
	var stdout, log bytes.Buffer
	results, err := bench.Run(context.Background(), bench.Config{
		Parts: all, Quick: true, Output: doc, Stdout: &stdout, Log: &log, Invocation: "fleetslice bench --all --quick",
		BinDir: buildBinaries(t),
	})
	if err != nil {
		t.Fatalf("bench failed: %v\nlog:\n%s", err, log.String())
	}
	if len(results) != len(all) {
		t.Fatalf("%d results for %d parts", len(results), len(all))
	}
	written, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range results {
		r := &results[i]
		t.Run(r.Part.Name, func(t *testing.T) {
			checkReport(t, r)
			for _, want := range []string{"<!-- bench:begin " + r.Part.Name + " -->", "fleetslice bench " + r.Part.Name + " --quick", "| Cores |"} {
				if !strings.Contains(string(written), want) {
					t.Errorf("document lacks %q", want)
				}
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("printed output lacks %q", want)
				}
			}
			for _, f := range r.Report.Figures {
				info, err := os.Stat(f.Path)
				if err != nil || info.Size() == 0 {
					t.Errorf("picture %s missing or empty: %v", f.Path, err)
				}
				if !strings.Contains(string(written), "("+f.Link+")") {
					t.Errorf("document does not link %s", f.Link)
				}
				if _, err := os.Stat(filepath.Join(filepath.Dir(doc), filepath.FromSlash(f.Link))); err != nil {
					t.Errorf("link %s does not resolve from the document: %v", f.Link, err)
				}
			}
		})
	}
	if !strings.Contains(string(written), foreign) {
		t.Errorf("the rewrite dropped another part's section")
	}
}

// runnableParts is every part, less the datapath part on a machine without what a pod network
// needs (root, ip, nsenter, socat); where FLEETSLICE_REQUIRE_KERNEL_TESTS=1 (CI) that is a failure.
func runnableParts(t *testing.T) []bench.Part {
	t.Helper()
	missing := datapathbench.Missing()
	if len(missing) == 0 {
		return parts.All()
	}
	if os.Getenv("FLEETSLICE_REQUIRE_KERNEL_TESTS") == "1" {
		t.Fatalf("the datapath part needs %v (FLEETSLICE_REQUIRE_KERNEL_TESTS=1)", missing)
	}
	t.Logf("skipping the datapath part: it needs %v", missing)
	var out []bench.Part
	for _, p := range parts.All() {
		if p.Name != "datapath" {
			out = append(out, p)
		}
	}
	return out
}

// buildBinaries builds the binaries parts start as processes, as `make build` would: the manager
// (the local-ClusterSet parts), the agent (the datapath part's Nodes) and fleetslice-dns (the dns
// part).
func buildBinaries(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir, "github.com/fleetslice/fleetslice/cmd/manager",
		"github.com/fleetslice/fleetslice/cmd/agent", "github.com/fleetslice/fleetslice/cmd/fleetslice-dns")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the manager, agent and fleetslice-dns: %v\n%s", err, out)
	}
	return dir
}

func checkReport(t *testing.T, r *bench.Result) {
	t.Helper()
	if len(r.Report.Tables) == 0 {
		t.Fatal("no tables")
	}
	for _, tab := range r.Report.Tables {
		if len(tab.Header) == 0 || len(tab.Rows) == 0 {
			t.Errorf("table %q is empty", tab.Caption)
		}
		for _, row := range tab.Rows {
			if len(row) != len(tab.Header) {
				t.Errorf("table %q: row %v has %d cells for %d columns", tab.Caption, row, len(row), len(tab.Header))
			}
			if row[0] == "" {
				t.Errorf("table %q: row %v has no name", tab.Caption, row)
			}
			for _, cell := range row {
				if strings.Contains(cell, "NaN") || strings.Contains(cell, "Inf") {
					t.Errorf("table %q: row %v has a cell %q", tab.Caption, row, cell)
				}
			}
		}
	}
	if len(r.Report.Checks) == 0 {
		t.Error("the part checked no invariant")
	}
	for _, c := range r.FailedChecks() {
		t.Errorf("invariant broken: %s: %s", c.Name, c.Failure)
	}
}
