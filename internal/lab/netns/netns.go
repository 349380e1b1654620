// Package netns creates throwaway network namespaces and runs code inside them, so that work on
// the kernel's network state (nftables tables, links, sockets) never touches the host's.
//
// Code runs on one OS thread that has entered the namespace with setns(2) and stays locked to its
// goroutine. Sockets opened on that thread and processes started from it (the nft binary that
// knftables runs, for instance) belong to the namespace. `ip netns exec` is no substitute: it
// starts a new process inside, while here one thread of the running process enters and the rest
// of the process stays on the host's network.
package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Missing lists what this process lacks to create network namespaces with Create: root and the
// ip binary (iproute2). Empty means Create may work; it can still fail, for instance in a
// container without CAP_SYS_ADMIN over its network namespace.
func Missing() []string {
	var missing []string
	if uid := os.Geteuid(); uid != 0 {
		missing = append(missing, fmt.Sprintf("root (running as uid %d)", uid))
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "the ip binary (Debian package iproute2) in PATH")
	}
	return missing
}

// Namespace is a named network namespace this process created, with a thread inside it.
type Namespace struct {
	// Name is the namespace's name under /run/netns.
	Name string

	calls     chan func()
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// Create makes a network namespace named prefix-<8 random hex digits>, brings its loopback up
// and enters it on a dedicated thread. The caller must Close it, also on error paths.
func Create(prefix string) (*Namespace, error) {
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("creating a network namespace needs %s", strings.Join(missing, " and "))
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	name := prefix + "-" + hex.EncodeToString(suffix)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	n := &Namespace{Name: name, calls: make(chan func()), done: make(chan struct{})}
	if err := n.enter(); err != nil {
		return nil, errors.Join(err, deleteNamed(name))
	}
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		err = fmt.Errorf("bringing up loopback in %s: %v: %s", name, err, strings.TrimSpace(string(out)))
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

// enter starts the thread that lives in the namespace and serves Do.
func (n *Namespace) enter() error {
	ready := make(chan error, 1)
	go func() {
		defer close(n.done)
		// Never unlocked: when this goroutine ends the runtime destroys the thread instead of
		// handing a thread in the wrong namespace to other goroutines.
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + n.Name)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err != nil {
			ready <- fmt.Errorf("entering network namespace %s: %w", n.Name, err)
			return
		}
		ready <- nil
		for fn := range n.calls {
			fn()
		}
	}()
	return <-ready
}

// Do runs fn on the thread inside the namespace and waits for it. fn must not start goroutines
// that expect to stay in the namespace: only this thread is in it.
func (n *Namespace) Do(fn func()) {
	finished := make(chan struct{})
	n.calls <- func() {
		defer close(finished)
		fn()
	}
	<-finished
}

// Command runs a command inside the namespace and returns its standard output; the error
// carries its standard error.
func (n *Namespace) Command(stdin string, name string, args ...string) (string, error) {
	var out []byte
	var err error
	n.Do(func() {
		cmd := exec.Command(name, args...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		if err != nil {
			err = fmt.Errorf("%s %s in namespace %s: %v: %s", name, strings.Join(args, " "), n.Name, err,
				strings.TrimSpace(stderr.String()))
		}
	})
	return string(out), err
}

// Close stops the thread and deletes the namespace, which destroys everything in it. It is safe
// to call more than once.
func (n *Namespace) Close() error {
	n.closeOnce.Do(func() {
		close(n.calls)
		<-n.done
		n.closeErr = deleteNamed(n.Name)
	})
	return n.closeErr
}

func deleteNamed(name string) error {
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Mirror makes a TCP address of the host's loopback (such as an API server's 127.0.0.1:port)
// reachable at the same address inside the namespace: it listens there and forwards each
// connection to the host. A process in the namespace then uses the host's kubeconfigs unchanged,
// certificates included. Closing the returned listener stops it.
func (n *Namespace) Mirror(addr string) (net.Listener, error) {
	var ln net.Listener
	var err error
	n.Do(func() { ln, err = net.Listen("tcp", addr) })
	if err != nil {
		return nil, fmt.Errorf("listening on %s in namespace %s: %w", addr, n.Name, err)
	}
	go serveTCP(ln, addr)
	return ln, nil
}
