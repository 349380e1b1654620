package podnet

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

func requireNetwork(t *testing.T) {
	t.Helper()
	missing := Missing()
	if _, err := exec.LookPath("socat"); err != nil {
		missing = append(missing, "the socat binary (Debian package socat)")
	}
	testutil.RequireKernel(t, "pod network test", missing)
}

// newTestNetwork is a network removed when the test ends, whatever it left.
func newTestNetwork(t *testing.T) *Network {
	t.Helper()
	n, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		if left := namespacesWithPrefix(t, n.Prefix); len(left) > 0 {
			t.Errorf("namespaces left after Close: %v", left)
		}
	})
	return n
}

func namespacesWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix+"-") {
			found = append(found, f[0])
		}
	}
	return found
}

// Pods on Nodes of different members reach each other by Pod IP through the fabric, and a Pod
// reaches its own Node's address.
func TestPodsOfDifferentMembersTalk(t *testing.T) {
	requireNetwork(t)
	n := newTestNetwork(t)
	a, err := n.AddNode("cluster-1", "a", netip.MustParsePrefix("10.1.0.0/23"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.AddNode("cluster-2", "b", netip.MustParsePrefix("10.2.2.0/23"))
	if err != nil {
		t.Fatal(err)
	}
	client, err := n.AddPod(a, "0a1b2c3d-0000-0000-0000-000000000001", netip.MustParseAddr("10.1.0.5"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Delete()
	server, err := n.AddPod(b, "0a1b2c3d-0000-0000-0000-000000000002", netip.MustParseAddr("10.2.3.7"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Delete()

	listener := exec.Command("ip", "netns", "exec", server.Netns, "socat", "TCP-LISTEN:8080,fork,reuseaddr", "SYSTEM:echo hello from b")
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = listener.Process.Kill(); _ = listener.Wait() }()

	var answer string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, err := exec.Command("ip", "netns", "exec", client.Netns, "socat", "-T2", "-", "TCP:10.2.3.7:8080,connect-timeout=1").Output()
		if answer = strings.TrimSpace(string(out)); err == nil && answer != "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if answer != "hello from b" {
		t.Fatalf("client in cluster-1 got %q from the server Pod in cluster-2", answer)
	}
	if err := server.Delete(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "-n", b.Netns, "route", "show", "10.2.3.7").Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("route to the deleted Pod still on its Node: %q (%v)", out, err)
	}
}
