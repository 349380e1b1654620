package agentbench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

func buildReport(results []sizeResult, s settings, dp chosen, check *checker) (*bench.Report, error) {
	rep := &bench.Report{Intro: intro(s, dp), Checks: check.checks(), Notes: notes(dp.kernel)}
	name := dataplaneName(dp.kernel)
	cold := bench.Table{
		Caption: "Cold sync: no table, an agent that has never synced, one full sync in one transaction",
		Header: []string{"Services", "Endpoints each", "Dataplane", "Runs", "Median", "Max", "Applying the transaction (median)",
			"CPU, agent (median)", "CPU, nft (median)", "of which kernel (median)", "Operations", "Chains", "Rules", "Sets and maps", "Elements"},
	}
	later := bench.Table{
		Caption: "Syncs over the programmed table: a periodic full resync, and incremental syncs after one change each",
		Header: []string{"Services", "Change", "Dataplane", "Runs", "Median", "Max", "Applying the transaction (median)",
			"CPU, agent (median)", "CPU, nft (median)", "of which kernel (median)", "Operations (median)", "Operations (max)", "Changed", "Removed"},
	}
	for _, r := range results {
		for _, st := range r.steps {
			sum := summarize(st.samples)
			nftCPU, kernelCPU := "n/a", "n/a"
			if dp.kernel {
				nftCPU, kernelCPU = duration(sum.cpuChildren), duration(sum.childrenSystem)
			}
			row := []string{bench.Count(int64(r.services))}
			if st.name == stepCold {
				row = append(row, bench.Count(int64(s.endpoints)), name, bench.Count(int64(len(st.samples))),
					duration(sum.wall), duration(sum.maxWall), duration(sum.inTransaction), duration(sum.cpuSelf), nftCPU, kernelCPU,
					bench.Count(int64(sum.operations)), bench.Count(int64(r.table.Chains)), bench.Count(int64(r.table.Rules)),
					bench.Count(int64(r.table.Sets)), bench.Count(int64(r.table.Elements)))
				cold.Rows = append(cold.Rows, row)
				continue
			}
			row = append(row, st.name, name, bench.Count(int64(len(st.samples))),
				duration(sum.wall), duration(sum.maxWall), duration(sum.inTransaction), duration(sum.cpuSelf), nftCPU, kernelCPU,
				bench.Count(int64(sum.operations)), bench.Count(int64(sum.maxOperations)),
				bench.Count(int64(st.changed)), bench.Count(int64(st.removed)))
			later.Rows = append(later.Rows, row)
		}
	}
	if len(cold.Rows) == 0 {
		return nil, errors.New("agent: no sync succeeded: " + firstFew(check.syncFailures))
	}
	rep.Tables = append(rep.Tables, cold)
	if len(later.Rows) > 0 {
		rep.Tables = append(rep.Tables, later)
	}
	return rep, nil
}

// summary holds medians of a measurement's samples, and its maxima.
type summary struct {
	wall, maxWall, inTransaction, cpuSelf, cpuChildren, childrenSystem time.Duration
	operations, maxOperations                                          int
}

func summarize(samples []sample) summary {
	pick := func(f func(sample) time.Duration) (median, most time.Duration) {
		v := make([]time.Duration, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		slices.Sort(v)
		return medianOf(v), v[len(v)-1]
	}
	var s summary
	s.wall, s.maxWall = pick(func(x sample) time.Duration { return x.wall })
	s.inTransaction, _ = pick(func(x sample) time.Duration { return x.inTransaction })
	s.cpuSelf, _ = pick(func(x sample) time.Duration { return x.cpuSelf })
	s.cpuChildren, _ = pick(func(x sample) time.Duration { return x.cpuChildren })
	s.childrenSystem, _ = pick(func(x sample) time.Duration { return x.childrenSystem })
	ops, maxOps := pick(func(x sample) time.Duration { return time.Duration(x.operations) })
	s.operations, s.maxOperations = int(ops), int(maxOps)
	return s
}

// medianOf a sorted slice; the lower middle of an even count, so it is a value that was seen.
func medianOf(sorted []time.Duration) time.Duration {
	return sorted[(len(sorted)-1)/2]
}

// duration prints what the tables show: µs and ms as the other parts do, seconds from one.
func duration(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return bench.Micros(float64(d) / float64(time.Microsecond))
}

func intro(s settings, dp chosen) string {
	where := "**dry-run**: the dataplane of the agent's `--dataplane=dry-run`, dataplane.New over knftables' " +
		"in-memory Fake, which applies exactly the transactions the kernel would get. No kernel was involved"
	if dp.kernel {
		where = fmt.Sprintf("**nftables**: the real `nft` and kernel (%s), in a network namespace the run created "+
			"and deleted (`fsbench-…`), so the host's ruleset was never touched. The agent's code ran on a thread that "+
			"entered the namespace, as the agent runs on a node", versions())
	}
	return fmt.Sprintf(`How long the node agent's dataplane (agent/dataplane) takes to program its nftables table
%s Services of %d endpoints each, from nothing and after changes. Dataplane: %s (%s).

Each Service has a cluster IP and one TCP port; every %dth also a NodePort, every %dth of all
externalTrafficPolicy: Local with %d of its endpoints on this node, and every %dth ClientIP session affinity
(a %g-hour timeout, Kubernetes' default), so the table carries every kind of object a node really has. **Cold**: the table is absent and an agent that
has never synced runs one full sync, a single transaction. Then, over the programmed table: a **periodic full
resync** (every Service compared with the table read back, and only what differs written, nothing here, as the
agent does to repair drift), and **incremental
syncs**, which rewrite only the Services that changed: one Service's endpoints change (one pod replaced), one
Service added, one removed, and 1%% of the Services changing at once. Each is repeated (the Runs column) and timed
from the call to Sync to its return; the heap is collected before each so that no sync pays for another's
garbage. "Applying the transaction" is the part spent in %s; "CPU, agent" is this process's CPU time
(getrusage, all threads)%s. Operations count the transaction's nft commands. Chains, rules, sets and maps and
elements describe the cold sync's table as listed back.

These figures are the agent's dataplane called in process, through the nft program (the agent's
--nftables-backend=nft) and with every Service given to each sync (Sync, which compares each with what it
wrote): the path whose incremental syncs grow with the table, since nft reads and checks the existing table on
every transaction. The agent runs neither by default: it programs the kernel over netlink and hands a sync only
the Services that changed, and that is what the side-by-side rows further down measure, through the agent's own
binary beside kube-proxy's nftables mode (when this run could start both); BenchmarkKernelScale in
agent/dataplane measures the netlink path in process.`,
		sizesText(s.sizes), s.endpoints, where, dp.why, NodePortEvery, LocalEvery, LocalEndpoints, AffinityEvery,
		AffinityTimeout.Hours(), transactionIn(dp.kernel), nftCPUText(dp.kernel))
}

func transactionIn(kernel bool) string {
	if kernel {
		return "the `nft` process and the kernel"
	}
	return "the Fake"
}

func nftCPUText(kernel bool) string {
	if kernel {
		return `, "CPU, nft" that of the nft processes it waited for, "of which kernel" their system time, where the kernel's nf_tables work on their requests is counted`
	}
	return ""
}

func sizesText(sizes []int) string {
	out := ""
	for i, n := range sizes {
		switch {
		case i == 0:
		case i == len(sizes)-1:
			out += " and "
		default:
			out += ", "
		}
		out += bench.Count(int64(n))
	}
	if len(sizes) > 1 {
		return "at " + out
	}
	return "for " + out
}

func notes(kernel bool) []string {
	out := []string{
		`The machine is shared and small: wall times include waiting for the CPU, and CPU times are the steadier
figure. Medians are of the runs shown (the lower middle run for an even count); with 20 runs the maximum is what a p99 would report. A measurement
stops repeating once one more run would take it past its time budget (--agent-budget), so the largest cold
and full syncs may have fewer runs than the others.`,
		`The agent runs a cold sync when it starts on a node without its table, and a full resync every
--sync-period (one hour by default), which reads the table back and writes only what differs: nothing for an
unchanged table, as here (an invariant). Syncs are serialized, so changes arriving during one wait for the next.`,
		`A removed Service's chains are flushed at once and deleted by a later sync at least a second after
(dataplane.Options.StaleChainDelay, for kernels before 6.2), so some incremental syncs also carry those
deletions: the operations maximum shows them.`,
		`The tables are checked against a fresh render: the transaction a never-synced agent writes for the same
Services, which is what dataplane.Render applies to its in-memory table. Chains, their hooks and number of
rules, sets and maps, and every element must match exactly; rules are compared by the addresses, jumps and set
references they contain, since nft prints rules in its own syntax.`,
		`Published figure, for orientation only: kubernetes/kubernetes PR 126013 (kube-proxy nftables partial sync)
reported about 141 ms to create one new Service when 10,000 Services (2 endpoints each) already exist, in a
kind test cluster on another machine, with other tools and kernel and timed its own way: a reference point for
the "one Service added" row, not a side-by-side comparison.`,
	}
	if !kernel {
		out = append(out, `In dry-run the transactions are applied to knftables' Fake, a test double whose element inserts
search its maps linearly: cold and full syncs grow with the square of the table and measure the Fake rather
than anything a node would pay. Run as root with nft and ip for kernel figures.`)
	}
	return out
}
