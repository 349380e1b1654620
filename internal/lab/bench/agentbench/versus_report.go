package agentbench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// versusCheck is the side-by-side invariant: every change reached each program's table.
func (c *checker) versusCheck(ran bool) []bench.Check {
	if !ran {
		return nil
	}
	ch := bench.Check{Name: "side by side: both programs started, and every change reached each program's table"}
	if len(c.versusFailures) > 0 {
		ch.Failure = fmt.Sprintf("%d failed: %s", len(c.versusFailures), firstFew(c.versusFailures))
	}
	return []bench.Check{ch}
}

// memoryCheckEndpoints and maxPeakRSSRatio: at a side-by-side size of at least this many
// endpoints (5,000 × 50 and larger) the agent's peak RSS is at most this share of kube-proxy's
// (#40).
const (
	memoryCheckEndpoints = 250_000
	maxPeakRSSRatio      = 0.5
)

// versusMemoryChecks holds the agent's peak RSS to its share of kube-proxy's at every large size
// both ran: the largest each reached anywhere in its runs (the cold syncs, the restart on its own
// table, the agent's periodic full resyncs), since a node pays whichever moment is largest.
func versusMemoryChecks(results []versusResult) []bench.Check {
	var out []bench.Check
	for _, r := range results {
		ag, okA := r.program("agent")
		kp, okK := r.program("kube-proxy")
		if !okA || !okK || r.size.services*r.size.endpoints < memoryCheckEndpoints {
			continue
		}
		c := bench.Check{Name: fmt.Sprintf("%s × %s: the agent's largest peak RSS (cold syncs, restart, periodic full resyncs) at most %.1f× kube-proxy's",
			bench.Count(int64(r.size.services)), bench.Count(int64(r.size.endpoints)), maxPeakRSSRatio)}
		a, k := ag.largestRSS(), kp.largestRSS()
		if a <= 0 || k <= 0 || float64(a) > maxPeakRSSRatio*float64(k) {
			c.Failure = fmt.Sprintf("%s against %s (%s)", mebibytes(a), mebibytes(k), ratio(float64(a), float64(k)))
		}
		out = append(out, c)
	}
	return out
}

// largestRSS is the largest peak resident memory of the program's runs: the cold syncs' and
// every later step's that measured one.
func (pr programResult) largestRSS() int64 {
	largest := pr.rss
	for _, st := range pr.steps {
		for _, smp := range st.samples {
			largest = max(largest, smp.rss)
		}
	}
	return largest
}

// medianOf the values that are numbers; NaN when none is.
func medianFloat(values []float64) float64 {
	var v []float64
	for _, x := range values {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

// ratio prints a/b as "0.42×", "n/a" when either is missing or b is zero.
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// stepMedians are one program's medians of one step.
type stepMedians struct {
	runs                      int
	own, outside, programming float64
	syncs, full, partial      int
}

func mediansOf(st versusStep) stepMedians {
	m := stepMedians{runs: len(st.samples)}
	var own, outside, prog []float64
	for _, s := range st.samples {
		own = append(own, s.own)
		outside = append(outside, s.outside.Seconds())
		prog = append(prog, s.programming)
		m.syncs += s.syncs
		m.full += s.full
		m.partial += s.partial
	}
	m.own, m.outside, m.programming = medianFloat(own), medianFloat(outside), medianFloat(prog)
	return m
}

func (pr programResult) step(name string) (stepMedians, bool) {
	for _, st := range pr.steps {
		if st.name == name && len(st.samples) > 0 {
			return mediansOf(st), true
		}
	}
	return stepMedians{}, false
}

func (r versusResult) program(name string) (programResult, bool) {
	for _, p := range r.programs {
		if p.name == name {
			return p, true
		}
	}
	return programResult{}, false
}

// versusTables are the side-by-side figures: one row per size and change with the ratio agent /
// kube-proxy of each figure, then the tables they programmed and their memory.
func versusTables(results []versusResult) []bench.Table {
	syncs := bench.Table{
		Caption: "Side by side with kube-proxy (nftables mode), both at their defaults: the same API server and Services, one program after the other, each in its own network namespace",
		Header: []string{"Services", "Endpoints each", "Change", "Runs (kube-proxy, agent)",
			"kube-proxy sync, own metric (median)", "agent sync, own metric (median)", "agent / kube-proxy, own metric",
			"kube-proxy, API write to table (median)", "agent, API write to table (median)", "agent / kube-proxy, write to table",
			"kube-proxy network programming (median)", "agent network programming (median)",
			"Syncs full/partial (kube-proxy; agent)"},
	}
	tables := bench.Table{
		Caption: "Side by side: the table each program wrote at the cold sync (family ip), and its memory",
		Header: []string{"Services", "Endpoints each", "Program", "`nft list table` lines", "Rules", "Chains",
			"Sets and maps", "Elements", "Peak RSS", "Load average at its start (1, 5, 15 min)"},
	}
	for _, r := range results {
		kp, _ := r.program("kube-proxy")
		ag, _ := r.program("agent")
		for _, name := range []string{versusCold, versusAdd, versusEndpoint, versusPercent} {
			k, okK := kp.step(name)
			a, okA := ag.step(name)
			if !okK && !okA {
				continue
			}
			nan := math.NaN()
			if !okK {
				k = stepMedians{own: nan, outside: nan, programming: nan}
			}
			if !okA {
				a = stepMedians{own: nan, outside: nan, programming: nan}
			}
			syncs.Rows = append(syncs.Rows, []string{bench.Count(int64(r.size.services)), bench.Count(int64(r.size.endpoints)), name,
				fmt.Sprintf("%d, %d", k.runs, a.runs),
				seconds(k.own), seconds(a.own), ratio(a.own, k.own),
				seconds(k.outside), seconds(a.outside), ratio(a.outside, k.outside),
				seconds(k.programming), seconds(a.programming),
				fmt.Sprintf("%d/%d; %d/%d", k.full, k.partial, a.full, a.partial)})
		}
		for _, p := range r.programs {
			tables.Rows = append(tables.Rows, []string{bench.Count(int64(r.size.services)), bench.Count(int64(r.size.endpoints)),
				p.name, bench.Count(int64(p.lines)), bench.Count(int64(p.counts.Rules)), bench.Count(int64(p.counts.Chains)),
				bench.Count(int64(p.counts.Sets)), bench.Count(int64(p.counts.Elements)), mebibytes(p.rss), p.load})
		}
	}
	var out []bench.Table
	for _, t := range []bench.Table{syncs, tables} {
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}

func mebibytes(b int64) string {
	if b <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

// versusIntro says how the side-by-side figures were taken, or why there are none.
func versusIntro(sizes []versusSize, runs, coldRuns int, skipped string) string {
	if skipped != "" {
		return "kube-proxy was not run side by side in this run: " + skipped + "."
	}
	var s []string
	for _, z := range sizes {
		label := fmt.Sprintf("%s × %s", bench.Count(int64(z.services)), bench.Count(int64(z.endpoints)))
		if z.agentOnly {
			label += " (the agent alone)"
		}
		s = append(s, label)
	}
	return fmt.Sprintf(`**Side by side with kube-proxy v1.37.2** (built from source by hack/k8s-binaries.sh kube-proxy) at %s
Services × endpoints: for each size one API server (envtest's etcd and kube-apiserver) holds the same Services and
EndpointSlices, written by the bench, with the mix above (those without a NodePort seeded straight into etcd
with the IPAddress objects that allocate their cluster IPs, because kube-apiserver's allocator makes creating N
Services through the API cost O(N²)); then the agent (bin/agent), then kube-proxy
(`+"`--proxy-mode=nftables`"+`), each in a fresh network namespace (IPv6 disabled in it, so kube-proxy runs
single-stack like the agent's `+"`--ip-families=IPv4`"+`), both at their defaults but for the node name
(`+"`--hostname-override`"+` / `+"`--node-name`"+` %s), the pod network (%s) and metrics on loopback. Each is measured
the same way: the **cold sync** from the process start to the end of its first sync with every Service, over
%d starts each in a new namespace (the median is reported); then, in the last start, %d runs each of **one Service added**, **one endpoint changed** and **1%% of the Services changed at once**, each
written %s after the program's last sync so that neither waits for its 1 s least interval between syncs.
"Own metric" is the mean of the program's own sync_proxy_rules_duration_seconds observations during the
change (kube-proxy: kubeproxy_…, the agent: fleetslice_agent_…; the cold sync: its full-sync histogram); "API
write to table" runs from the first write to the end of the sync after which `+"`nft list table`"+` in its namespace
holds the change, as the program's own sync_proxy_rules_last_timestamp_seconds says; "network programming" is
its network_programming_duration_seconds, from the EndpointSlice's last-change-trigger-time annotation the bench
stamps. Ratios are agent / kube-proxy: below 1 the agent is faster or smaller. A Service added is two writes
(the Service, then its EndpointSlice) and 1%% of the Services are many: the first write starts a sync at once and
the rest wait for the next one, at least 1 s later by both programs' default least interval between syncs, so
the write-to-table time of those rows is mostly that interval, the same for both; the own-metric columns are the
work each sync did. kube-proxy also runs a sync every 30 s (--sync-period) that may fall inside a change.`,
		strings.Join(s, ", "), benchNode, podCIDR, max(coldRuns, 1), runs, quietGap.Round(100*time.Millisecond))
}
