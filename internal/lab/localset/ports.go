package localset

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// kwokctl picks each component's port by counting down from 32767, afresh in every kwokctl
// process, and skips only ports that are bound right now or that clusters of the same kwok
// workdir use. Two ClusterSets coming up at once (make test runs packages in parallel) therefore
// pick the same ports, and whichever component binds second exits: a cluster that looks up but
// never runs its Pods. So localset chooses every port itself, at random below the kernel's
// ephemeral range, and records each in a machine-wide registry until the process that reserved
// it exits, by which time the component holding it is listening.

// lowestPort keeps clear of well-known and commonly configured service ports.
const lowestPort = 10000

// portRegistry is the machine-wide record of reserved ports: one "port pid" line each, guarded by
// an exclusive flock on a lock file beside it.
type portRegistry struct {
	dir string
	// ephemeralLow is the first port the kernel hands out for outgoing connections; reserved
	// ports stay below it so no client socket can already hold one.
	ephemeralLow int
}

func defaultPortRegistry() portRegistry {
	return portRegistry{dir: os.TempDir(), ephemeralLow: ephemeralPortStart()}
}

// ephemeralPortStart reads the start of the kernel's ephemeral range (32768 unless configured).
func ephemeralPortStart() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= lowestPort {
		return 32768
	}
	return low
}

// reserve returns n distinct ports that are free now and that no live process has reserved, and
// records them for this process.
func (r portRegistry) reserve(n int) (ports []uint32, err error) {
	span := r.ephemeralLow - lowestPort
	if span < n {
		return nil, fmt.Errorf("only %d ports below the ephemeral range start %d", span, r.ephemeralLow)
	}
	unlock, err := r.lock()
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	taken, live, err := r.liveReservations()
	if err != nil {
		return nil, err
	}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("no %d free ports between %d and %d after %d tries", n, lowestPort, r.ephemeralLow, tries)
		}
		port := uint32(lowestPort + rand.IntN(span))
		if taken[port] || !portFree(port) {
			continue
		}
		taken[port] = true
		ports = append(ports, port)
		live = append(live, fmt.Sprintf("%d %d", port, os.Getpid()))
	}
	// Rewritten whole, without the dead processes' lines, so the file does not grow for ever.
	return ports, r.write(live)
}

func (r portRegistry) path() string { return filepath.Join(r.dir, "fleetslice-localset-ports") }

// lock takes the registry's flock, which the kernel drops if this process dies holding it.
func (r portRegistry) lock() (unlock func() error, err error) {
	f, err := os.OpenFile(r.path()+".lock", os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("opening the port registry lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the port registry: %w", err)
	}
	return func() error {
		return errors.Join(syscall.Flock(int(f.Fd()), syscall.LOCK_UN), f.Close())
	}, nil
}

// liveReservations reads the registry: the ports whose reserving process still runs, and their
// lines.
func (r portRegistry) liveReservations() (taken map[uint32]bool, live []string, err error) {
	taken = map[uint32]bool{}
	f, err := os.Open(r.path())
	if errors.Is(err, os.ErrNotExist) {
		return taken, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the port registry: %w", err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		var port uint32
		var pid int
		// A malformed line (a crash mid-write) reserves nothing.
		if _, err := fmt.Sscanf(scanner.Text(), "%d %d", &port, &pid); err != nil || !processAlive(pid) {
			continue
		}
		taken[port] = true
		live = append(live, scanner.Text())
	}
	if err := scanner.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading the port registry: %w", err)
	}
	return taken, live, nil
}

func (r portRegistry) write(lines []string) error {
	content := ""
	if len(lines) > 0 {
		content = strings.Join(lines, "\n") + "\n"
	}
	if err := os.WriteFile(r.path(), []byte(content), 0o666); err != nil {
		return fmt.Errorf("writing the port registry: %w", err)
	}
	return nil
}

// processAlive reports whether pid runs; EPERM means it runs as another user.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// portFree reports whether port can be listened on, on loopback and on every address, as the
// components listen on one or the other.
func portFree(port uint32) bool {
	for _, host := range []string{"127.0.0.1", ""} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// FreeLoopbackAddress is a loopback address whose port nothing listens on right now, for a
// process started a moment later (a manager's metrics or pprof endpoint in a measurement run);
// another process may take it first, which a measurement run can afford.
func FreeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
