package agentbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// Full syncs of an unchanged table, after the changes: each program is stopped and started again
// in its namespace, on the table it programmed, as on a restart; its first sync is a full one.
// kube-proxy's is its full sync of every chain, set and map; the agent's compares the table with
// what it would write and writes only the difference, here nothing. The agent is started with a
// short --sync-period, and its periodic full resyncs (a Syncer that remembers what it wrote)
// measured too; kube-proxy's full resync comes once an hour, and is not configurable. What each
// wrote is the namespace's nftables ruleset generation before and after, which every commit
// increments.

// The restart steps.
const (
	versusRestart = "restart on its own table: first (full) sync"
	versusResync  = "periodic full resync of an unchanged table"
)

// The agent's --sync-period in the restart, and how many periodic resyncs are measured.
const (
	resyncPeriod      = 20 * time.Second
	quickResyncPeriod = 3 * time.Second
	resyncSamples     = 3
)

// resync measures the restart and, for the agent, its periodic full resyncs. The program's peak
// memory so far goes to pr first: the restarted process's is the resync's.
func (m *measuring) resync(ctx context.Context, p program, r *running, pr *programResult, apiHostPort, kubeconfig, logDir string) error {
	pr.rss = r.peakRSS()
	period, samples := resyncPeriod, resyncSamples
	if m.env.Quick {
		period, samples = quickResyncPeriod, 1
	}
	var extra []string
	if p.name == "agent" {
		extra = []string{"--sync-period", period.String()}
	}
	r.halt()
	gen, err := r.generation()
	if err != nil {
		return err
	}
	if err := r.restart(apiHostPort, kubeconfig, logDir, extra...); err != nil {
		return err
	}
	smp, after, err := r.nextFullSync(ctx, scrape{}, coldTimeout)
	if err != nil {
		return fmt.Errorf("first sync after the restart: %w", err)
	}
	smp.outside = r.lastSync(after).Sub(r.started)
	// A sync that follows at once (the agent's second look at the affinity maps it read) counts too.
	time.Sleep(quietGap)
	if smp.commits, err = r.commitsSince(gen); err != nil {
		return err
	}
	smp.rss = r.peakRSS()
	m.env.Logf("side by side %s %-10s %-34s own %s, %d nftables commits", m.size, p.name, versusRestart, seconds(smp.own), smp.commits)
	pr.steps = append(pr.steps, versusStep{name: versusRestart, samples: []versusSample{smp}})
	if p.name != "agent" {
		return nil
	}
	step := versusStep{name: versusResync}
	for range samples {
		smp, err := r.periodic(ctx, period)
		if err != nil {
			pr.steps = append(pr.steps, step)
			return fmt.Errorf("%s: %w", versusResync, err)
		}
		m.env.Logf("side by side %s %-10s %-34s own %s, %d nftables commits", m.size, p.name, versusResync, seconds(smp.own), smp.commits)
		step.samples = append(step.samples, smp)
	}
	pr.steps = append(pr.steps, step)
	return nil
}

// periodic waits for the program's next full sync, which nothing but its period starts.
func (r *running) periodic(ctx context.Context, period time.Duration) (versusSample, error) {
	before, err := r.scrape(ctx)
	if err != nil {
		return versusSample{}, err
	}
	gen, err := r.generation()
	if err != nil {
		return versusSample{}, err
	}
	smp, _, err := r.nextFullSync(ctx, before, 2*period+stepTimeout)
	if err != nil {
		return versusSample{}, err
	}
	if smp.commits, err = r.commitsSince(gen); err != nil {
		return versusSample{}, err
	}
	smp.rss = r.peakRSS()
	return smp, nil
}

// nextFullSync waits for the end of the program's next full sync after before, by its metrics
// alone: the table holds every Service already, and listing it at 50,000 Services takes nft
// longer than a short --sync-period.
func (r *running) nextFullSync(ctx context.Context, before scrape, timeout time.Duration) (versusSample, scrape, error) {
	name := r.prefix + metricSyncFull
	for deadline := time.Now().Add(timeout); ; {
		after, err := r.scrape(ctx)
		if err == nil && after.histogram(name).count > before.histogram(name).count {
			return r.sampleOf(before, after, 0, metricSyncFull), after, nil
		}
		select {
		case e := <-r.exited: // not listening yet is fine, gone is not
			r.exited <- e
			return versusSample{}, nil, err
		default:
		}
		if time.Now().After(deadline) {
			return versusSample{}, nil, fmt.Errorf("%s made no full sync within %s (last error: %v); its log ends:\n%s", r.name, timeout, err, r.logTail())
		}
		select {
		case <-ctx.Done():
			return versusSample{}, nil, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// halt stops the program's process (SIGTERM, then SIGKILL after 15 s), leaving its namespace
// and table.
func (r *running) halt() {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.exited:
		r.exited <- err
	case <-time.After(15 * time.Second):
		_ = r.cmd.Process.Kill()
		r.exited <- <-r.exited
	}
}

// restart starts the halted program again in the same namespace, which kept its table, with
// extra arguments.
func (r *running) restart(apiHostPort, kubeconfig, logDir string, extra ...string) error {
	// The old process's mirror of the API server closes right after it exits.
	ln, err := r.ns.Mirror(apiHostPort)
	for try := 0; err != nil && try < 50; try++ {
		time.Sleep(20 * time.Millisecond)
		ln, err = r.ns.Mirror(apiHostPort)
	}
	if err != nil {
		return err
	}
	r.logPath = filepath.Join(logDir, r.name+"-restarted.log")
	logFile, err := os.Create(r.logPath)
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	r.cmd = exec.Command(r.binary, append(r.args(kubeconfig), extra...)...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	r.exited = make(chan error, 1)
	r.ns.Do(func() { r.started = time.Now(); err = r.cmd.Start() })
	if err != nil {
		return errors.Join(err, ln.Close(), logFile.Close())
	}
	cmd, exited := r.cmd, r.exited
	go func() {
		exited <- cmd.Wait()
		_ = logFile.Close()
		_ = ln.Close()
	}()
	return nil
}

// commitsSince is how many nftables commits the namespace saw since generation gen.
func (r *running) commitsSince(gen uint32) (int64, error) {
	now, err := r.generation()
	return int64(now - gen), err
}

// generation is the nftables ruleset generation of the program's namespace.
func (r *running) generation() (uint32, error) {
	var gen uint32
	var err error
	r.ns.Do(func() { gen, err = nftGeneration() })
	return gen, err
}

func nftGeneration() (uint32, error) {
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	msgs, err := conn.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("reading the nftables generation: %w", err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, err
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, errors.New("reading the nftables generation: none in the answer")
}

// resyncTables report the restart and periodic full syncs, beside kube-proxy's full sync.
func resyncTables(results []versusResult) []bench.Table {
	t := bench.Table{
		Caption: fmt.Sprintf("Full syncs of an unchanged table, after the changes: each program stopped and started again in its namespace, on the table it programmed (its first sync is a full one), and the agent, started with --sync-period=%s, left for its periodic full resyncs (kube-proxy's come once an hour). Own metric: its full-sync histogram; nftables commits: the namespace's ruleset generation before and after (0: nothing written); peak RSS: the restarted process's", resyncPeriod),
		Header: []string{"Services", "Endpoints each", "Program", "Full sync", "Runs", "Own metric (median)",
			"agent / kube-proxy's full sync", "nftables commits (most)", "Peak RSS"},
	}
	for _, r := range results {
		kp, _ := r.program("kube-proxy")
		kpFull, _ := kp.step(versusRestart)
		for _, row := range []struct{ program, step string }{
			{"kube-proxy", versusRestart}, {"agent", versusRestart}, {"agent", versusResync},
		} {
			p, _ := r.program(row.program)
			st, ok := p.rawStep(row.step)
			if !ok {
				continue
			}
			m := mediansOf(st)
			vs := "n/a"
			if row.program == "agent" && kpFull.runs > 0 {
				vs = ratio(m.own, kpFull.own)
			}
			t.Rows = append(t.Rows, []string{bench.Count(int64(r.size.services)), bench.Count(int64(r.size.endpoints)),
				row.program, row.step, fmt.Sprint(m.runs), seconds(m.own), vs, fmt.Sprint(mostCommits(st)), mebibytes(mostRSS(st))})
		}
	}
	if len(t.Rows) == 0 {
		return nil
	}
	return []bench.Table{t}
}

func (pr programResult) rawStep(name string) (versusStep, bool) {
	i := slices.IndexFunc(pr.steps, func(s versusStep) bool { return s.name == name && len(s.samples) > 0 })
	if i < 0 {
		return versusStep{}, false
	}
	return pr.steps[i], true
}

func mostCommits(st versusStep) int64 {
	var n int64
	for _, s := range st.samples {
		n = max(n, s.commits)
	}
	return n
}

func mostRSS(st versusStep) int64 {
	var n int64
	for _, s := range st.samples {
		n = max(n, s.rss)
	}
	return n
}

// resyncCheck is the invariant: no full sync of the agent's unchanged table wrote anything.
func resyncCheck(results []versusResult) []bench.Check {
	ch := bench.Check{Name: "side by side: the agent's full syncs of its unchanged table (after a restart, and periodic) wrote nothing"}
	var bad []string
	measured := 0
	for _, r := range results {
		ag, _ := r.program("agent")
		for _, name := range []string{versusRestart, versusResync} {
			st, ok := ag.rawStep(name)
			if !ok {
				continue
			}
			measured++
			if n := mostCommits(st); n != 0 {
				bad = append(bad, fmt.Sprintf("%s, %s: %d nftables commits", r.size, name, n))
			}
		}
	}
	switch {
	case len(bad) > 0:
		ch.Failure = firstFew(bad)
	case measured == 0 && len(results) > 0:
		ch.Failure = "no full resync of the agent was measured"
	}
	return []bench.Check{ch}
}
