package dataplane

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// requireKernel skips (or, under FLEETSLICE_REQUIRE_KERNEL_TESTS=1, fails)
// with a message naming exactly what is missing.
func requireKernel(tb testing.TB) {
	tb.Helper()
	missing := netns.Missing()
	if _, err := exec.LookPath("nft"); err != nil {
		missing = append(missing, "the nft binary (Debian package nftables) in PATH")
	}
	testutil.RequireKernel(tb, "real-kernel dataplane test", missing)
}

func run(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNetns creates a network namespace with a unique name and deletes it
// when the test ends, pass or fail. Deleting it also destroys its veths.
func newNetns(tb testing.TB, prefix, role string) string {
	tb.Helper()
	name := prefix + "-" + role
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("cannot create network namespace %s: %v: %s", name, err, strings.TrimSpace(string(out)))
		if os.Getenv(testutil.RequireKernelEnv) == "1" {
			tb.Fatal(msg)
		}
		tb.Skip("real-kernel dataplane test needs network namespaces: " + msg)
	}
	tb.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			tb.Errorf("deleting network namespace %s: %v: %s", name, err, out)
		}
	})
	run(tb, "ip", "-n", name, "link", "set", "lo", "up")
	return name
}

func uniquePrefix(tb testing.TB) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return "fstest-" + hex.EncodeToString(b)
}

// nsThread runs functions on one OS thread that has entered a network
// namespace. Sockets opened there and processes started there (the nft
// binary knftables runs) belong to that namespace, so the test never
// touches the host's network. The thread stays locked and exits with its
// goroutine, so the runtime never reuses it elsewhere.
type nsThread struct {
	calls chan func()
	done  chan struct{}
}

func enterNetns(tb testing.TB, name string) *nsThread {
	tb.Helper()
	n := &nsThread{calls: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(n.done)
		runtime.LockOSThread() // deliberately never unlocked
		f, err := os.Open("/run/netns/" + name)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		ready <- err
		if err != nil {
			return
		}
		for fn := range n.calls {
			fn()
		}
	}()
	if err := <-ready; err != nil {
		tb.Fatalf("entering network namespace %s: %v", name, err)
	}
	tb.Cleanup(func() {
		close(n.calls)
		<-n.done
	})
	return n
}

// do runs fn inside the namespace and waits for it.
func (n *nsThread) do(fn func()) {
	finished := make(chan struct{})
	n.calls <- func() {
		defer close(finished)
		fn()
	}
	<-finished
}
