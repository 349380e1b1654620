package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// unreachableKubeconfig points at a port nothing listens on, as a cluster that is down does.
const unreachableKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: down
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: down
  context: {cluster: down, user: u, namespace: shop}
current-context: down
users:
- name: u
  user: {token: t}
`

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestBadInputGivesErrors checks that each way of pointing the plugin at nothing ends in a
// message naming the problem, never a panic or a hang.
func TestBadInputGivesErrors(t *testing.T) {
	dir := t.TempDir()
	down := filepath.Join(dir, "down.kubeconfig")
	if err := os.WriteFile(down, []byte(unreachableKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"explain", "service", "--kubeconfig", down, "web"}, "reading Service shop/web"},
		{[]string{"explain", "import", "--kubeconfig", down, "-n", "shop", "web"}, "reading ServiceImport shop/web"},
		{[]string{"explain", "service", "--kubeconfig", down, "--context", "nope", "web"}, "context was not found for specified context: nope"},
		{[]string{"explain", "service", "--kubeconfig", filepath.Join(dir, "missing"), "web"}, "kubeconfig"},
		{[]string{"explain", "service", "--kubeconfig", down}, "accepts 1 arg"},
		{[]string{"join", "--broker-kubeconfig", down, "--kubeconfig", down}, "--cluster-id"},
	}
	for _, tc := range cases {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	// status keeps going past a cluster it cannot read and says which one.
	out, err := run(t, "status", "--kubeconfig", down)
	if err != nil || !strings.Contains(out, "== down") || !strings.Contains(out, "unreachable:") {
		t.Errorf("status of a cluster that is down: %v\n%s", err, out)
	}
}
