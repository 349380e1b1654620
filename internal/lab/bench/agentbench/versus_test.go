package agentbench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// TestQuickSideBySide runs the agent binary and kube-proxy side by side at a small size, when
// kube-proxy has been built (`make kube-proxy`; `make test` does not build it) and the kernel
// can be used. The in-process measurements run dry-run and tiny: they are not what it tests.
func TestQuickSideBySide(t *testing.T) {
	if _, err := k8sbin.Path(k8sbin.KubeProxy); err != nil {
		t.Skipf("kube-proxy is not built (make kube-proxy): %v", err)
	}
	testutil.RequireKernel(t, "the side-by-side run", kernelMissing())
	ctrllog.SetLogger(logr.Discard())
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetslice/fleetslice/cmd/agent").CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	before := versusNamespaces(t)
	p := Part()
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	p.Flags(fs)
	if err := fs.Parse([]string{"--agent-dataplane=dry-run", "--agent-sizes=20", "--agent-kube-proxy=on",
		"--agent-kube-proxy-sizes=100x10", "--agent-kube-proxy-runs=1", "--agent-cold-runs=2"}); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rep, err := p.Run(context.Background(), bench.Env{Quick: true, Log: &log, BinDir: bin})
	if err != nil {
		t.Fatalf("agent part: %v\nlog:\n%s", err, log.String())
	}
	if len(rep.Tables) != 5 {
		t.Fatalf("%d tables, want cold, later and the three side-by-side ones\nchecks: %+v\nlog:\n%s", len(rep.Tables), rep.Checks, log.String())
	}
	syncs, tables, resyncs := rep.Tables[2], rep.Tables[3], rep.Tables[4]
	if len(resyncs.Rows) != 3 || resyncs.Rows[0][2] != "kube-proxy" || resyncs.Rows[2][3] != versusResync {
		t.Errorf("full resync rows %v, want kube-proxy's restart, the agent's and its periodic resync", resyncs.Rows)
	}
	for _, row := range resyncs.Rows[1:] {
		if row[7] != "0" {
			t.Errorf("the agent's unchanged full sync wrote: %v", row)
		}
	}
	if len(syncs.Rows) != 4 {
		t.Errorf("side-by-side rows %v, want the cold sync and three changes", syncs.Rows)
	}
	for i, row := range syncs.Rows {
		// Each program starts cold twice; the changes run once, in the last start.
		want := "1, 1"
		if i == 0 {
			want = "2, 2"
		}
		if row[3] != want {
			t.Errorf("row %v: want %s runs of each program", row, want)
		}
		for _, cell := range row[4:10] {
			if cell == "n/a" || strings.Contains(cell, "NaN") {
				t.Errorf("row %v lacks a figure", row)
			}
		}
	}
	if len(tables.Rows) != 2 || tables.Rows[0][2] != "agent" || tables.Rows[1][2] != "kube-proxy" {
		t.Fatalf("table rows %v, want the agent's then kube-proxy's", tables.Rows)
	}
	for _, row := range tables.Rows {
		if row[3] == "0" || row[4] == "0" {
			t.Errorf("%s's table is empty: %v", row[2], row)
		}
	}
	for _, c := range rep.Checks {
		if !c.Passed() {
			t.Errorf("invariant broken: %s: %s\nlog:\n%s", c.Name, c.Failure, log.String())
		}
	}
	if after := versusNamespaces(t); after != before {
		t.Errorf("network namespaces before the run %q, after %q: the run left one behind", before, after)
	}
}

func versusNamespaces(t *testing.T) string {
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "fsvs-") {
			names = append(names, e.Name())
		}
	}
	return strings.Join(names, ",")
}
