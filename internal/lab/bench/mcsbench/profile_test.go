package mcsbench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestCountersBetweenListsWhatAPhaseAdded: a phase's reconciles file lists, per controller and
// result, the syncs and queue adds the phase added, and leaves out what did not move and every
// other metric; a manager started in the phase (no metrics before) counts from zero.
func TestCountersBetweenListsWhatAPhaseAdded(t *testing.T) {
	before := []byte(`controller_runtime_reconcile_total{controller="multicluster-import",result="success"} 10
controller_runtime_reconcile_total{controller="multicluster-export",result="success"} 4
workqueue_adds_total{controller="multicluster-import",name="multicluster-import"} 12
process_cpu_seconds_total 3
`)
	after := []byte(`controller_runtime_reconcile_total{controller="multicluster-import",result="success"} 25
controller_runtime_reconcile_total{controller="multicluster-export",result="success"} 4
controller_runtime_reconcile_total{controller="multicluster-import",result="requeue_after"} 2
workqueue_adds_total{controller="multicluster-import",name="multicluster-import"} 40
process_cpu_seconds_total 9
`)
	fields := func(lines []string, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range lines {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
		return out
	}
	want := []string{
		"controller_runtime_reconcile_total controller=multicluster-import result=requeue_after 2",
		"controller_runtime_reconcile_total controller=multicluster-import result=success 15",
		"workqueue_adds_total controller=multicluster-import name=multicluster-import 28",
	}
	if got := fields(countersBetween(before, after)); !slices.Equal(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := fields(countersBetween(nil, after)); len(got) != 4 || got[2] != "controller_runtime_reconcile_total controller=multicluster-import result=success 25" {
		t.Fatalf("from a manager just started: %q", got)
	}
	if _, err := countersBetween(before, []byte("workqueue_adds_total{name=\"x\"} not-a-number\n")); err == nil {
		t.Fatal("a malformed exposition was read without an error")
	}
}

// managerGet reads a page once when given no time to wait, and says why when it cannot.
func TestManagerGetAsksOnceWithoutAWait(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "counters") }))
	got, err := managerGet(context.Background(), srv.URL, 0)
	if err != nil || string(got) != "counters" {
		t.Fatalf("got %q, %v", got, err)
	}
	srv.Close()
	if _, err := managerGet(context.Background(), srv.URL, 0); err == nil || !strings.Contains(err.Error(), "last:") {
		t.Fatalf("a manager that is gone: %v", err)
	}
}
