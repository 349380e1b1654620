package agentbench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/internal/lab/netns"
)

// The dataplanes the part can measure.
const (
	Auto     = "auto"
	Nftables = "nftables"
	DryRun   = "dry-run"
)

// backend is where the table lives: the kernel inside a throwaway network namespace, or
// knftables' in-memory Fake as `--dataplane=dry-run` uses it.
type backend interface {
	// fresh deletes the table, if any, and returns a Syncer that has never synced, as a
	// freshly started agent has.
	fresh(ctx context.Context) (*dataplane.Syncer, error)
	// sync runs one measured Sync.
	sync(ctx context.Context, s *dataplane.Syncer, services []dataplane.Service, full bool) (sample, dataplane.Stats, error)
	// table lists the table as it is now.
	table(ctx context.Context) (*tableModel, error)
	close() error
}

// sample is one measured sync.
type sample struct {
	// wall is the whole Sync; inTransaction the part of it spent applying the transaction
	// (the nft process and the kernel, or the Fake).
	wall, inTransaction time.Duration
	// cpuSelf is this process's CPU time (user and system, every thread); cpuChildren that of
	// the nft processes it waited for, and childrenSystem the system (kernel) part of it.
	cpuSelf, cpuChildren, childrenSystem time.Duration
	operations                           int
}

// timedNFT measures the time spent applying transactions.
type timedNFT struct {
	knftables.Interface
	inRun time.Duration
}

func (t *timedNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	start := time.Now()
	err := t.Interface.Run(ctx, tx)
	t.inRun += time.Since(start)
	return err
}

type cpuTimes struct{ self, children, childrenSystem time.Duration }

func readCPU() cpuTimes {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return cpuTimes{
		self:           time.Duration(self.Utime.Nano() + self.Stime.Nano()),
		children:       time.Duration(children.Utime.Nano() + children.Stime.Nano()),
		childrenSystem: time.Duration(children.Stime.Nano()),
	}
}

// measure runs one Sync with its costs. The heap is collected first so that one sync does not
// pay for the garbage of the one before.
func measure(ctx context.Context, s *dataplane.Syncer, timed *timedNFT, services []dataplane.Service, full bool) (sample, dataplane.Stats, error) {
	runtime.GC()
	timed.inRun = 0
	before := readCPU()
	start := time.Now()
	st, err := s.Sync(ctx, services, full)
	wall := time.Since(start)
	after := readCPU()
	return sample{wall: wall, inTransaction: timed.inRun, cpuSelf: after.self - before.self,
		cpuChildren: after.children - before.children, childrenSystem: after.childrenSystem - before.childrenSystem,
		operations: st.Operations}, st, err
}

// dryRunBackend builds its Syncers the way dataplane.NewDryRun does: dataplane.New over a fresh
// knftables.Fake, here wrapped to time the transactions.
type dryRunBackend struct {
	fake  *knftables.Fake
	timed *timedNFT
}

func (b *dryRunBackend) fresh(context.Context) (*dataplane.Syncer, error) {
	b.fake = knftables.NewFake(knftables.IPv4Family, dataplane.TableName)
	b.timed = &timedNFT{Interface: b.fake}
	return dataplane.New(b.timed, dataplaneOptions())
}

func (b *dryRunBackend) sync(ctx context.Context, s *dataplane.Syncer, services []dataplane.Service, full bool) (sample, dataplane.Stats, error) {
	return measure(ctx, s, b.timed, services, full)
}

func (b *dryRunBackend) table(context.Context) (*tableModel, error) {
	return parseCommands(b.fake.Dump())
}

func (b *dryRunBackend) close() error { return nil }

// kernelBackend runs every nft command, and every Sync, on a thread inside a network namespace
// it created for the run, so the host's ruleset is never touched.
type kernelBackend struct {
	ns    *netns.Namespace
	nft   knftables.Interface
	timed *timedNFT
}

// kernelMissing lists what the nftables dataplane needs and this process lacks.
func kernelMissing() []string {
	missing := netns.Missing()
	if _, err := exec.LookPath("nft"); err != nil {
		missing = append(missing, "the nft binary (Debian package nftables) in PATH")
	}
	return missing
}

func newKernelBackend() (*kernelBackend, error) {
	if missing := kernelMissing(); len(missing) > 0 {
		return nil, fmt.Errorf("the nftables dataplane needs %s", strings.Join(missing, " and "))
	}
	ns, err := netns.Create("fsbench")
	if err != nil {
		return nil, err
	}
	b := &kernelBackend{ns: ns}
	ns.Do(func() { b.nft, err = dataplane.Open(knftables.IPv4Family) })
	if err != nil {
		return nil, errors.Join(err, ns.Close())
	}
	return b, nil
}

func (b *kernelBackend) fresh(context.Context) (*dataplane.Syncer, error) {
	// Adding before deleting works whether or not the table exists, in one transaction.
	if _, err := b.ns.Command("add table ip "+dataplane.TableName+"\ndelete table ip "+dataplane.TableName+"\n",
		"nft", "-f", "-"); err != nil {
		return nil, err
	}
	b.timed = &timedNFT{Interface: b.nft}
	return dataplane.NewKernelNft(b.timed, dataplaneOptions())
}

func (b *kernelBackend) sync(ctx context.Context, s *dataplane.Syncer, services []dataplane.Service, full bool) (sample, dataplane.Stats, error) {
	var smp sample
	var st dataplane.Stats
	var err error
	b.ns.Do(func() { smp, st, err = measure(ctx, s, b.timed, services, full) })
	return smp, st, err
}

func (b *kernelBackend) table(context.Context) (*tableModel, error) {
	out, err := b.ns.Command("", "nft", "--json", "list", "table", "ip", dataplane.TableName)
	if err != nil {
		return nil, err
	}
	return parseListing([]byte(out))
}

func (b *kernelBackend) close() error { return b.ns.Close() }

// recordingNFT keeps the text of the last transaction instead of applying it.
type recordingNFT struct {
	knftables.Interface
	last string
}

func (r *recordingNFT) Run(_ context.Context, tx *knftables.Transaction) error {
	r.last = tx.String()
	return nil
}

// freshRender is the table a full sync of services writes into an empty table: the transaction
// of a Syncer that has never synced, read back as commands. It is what dataplane.Render applies
// to its in-memory table, without the Fake, whose element inserts grow with the table (a
// 10,000-Service render takes it about 20 s).
func freshRender(ctx context.Context, services []dataplane.Service) (*tableModel, error) {
	rec := &recordingNFT{Interface: knftables.NewFake(knftables.IPv4Family, dataplane.TableName)}
	s, err := dataplane.New(rec, dataplaneOptions())
	if err != nil {
		return nil, err
	}
	if _, err := s.Sync(ctx, services, true); err != nil {
		return nil, err
	}
	return parseCommands(rec.last)
}
