package netns

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

func requireNamespaces(t *testing.T) {
	t.Helper()
	testutil.RequireKernel(t, "network namespace test", Missing())
}

func TestCreateEntersAndDeletes(t *testing.T) {
	requireNamespaces(t)
	ns, err := Create("fstest")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if !strings.HasPrefix(ns.Name, "fstest-") || len(ns.Name) != len("fstest-")+8 {
		t.Errorf("name %q is not fstest-<8 hex>", ns.Name)
	}

	// The thread sees only the namespace's loopback, and processes it starts do too.
	var ifaces []net.Interface
	ns.Do(func() { ifaces, err = net.Interfaces() })
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != 1 || ifaces[0].Name != "lo" || ifaces[0].Flags&net.FlagUp == 0 {
		t.Errorf("interfaces inside = %v, want only lo, up", ifaces)
	}
	out, err := ns.Command("", "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 || !strings.Contains(lines[0], " lo:") {
		t.Errorf("ip link inside lists %q, want only lo", out)
	}
	if _, err := ns.Command("", "false"); err == nil {
		t.Error("a failing command reported no error")
	}

	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + ns.Name); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("namespace file still there after Close: %v", err)
	}
	if err := ns.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
