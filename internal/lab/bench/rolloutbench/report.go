package rolloutbench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

func buildReport(env bench.Env, sz sizes, results []settingResult) (*bench.Report, error) {
	r := &bench.Report{
		Intro: fmt.Sprintf("A simulated cluster of the local ClusterSet (kwok Nodes, real kube-apiserver, "+
			"kube-controller-manager and kube-scheduler), %d Nodes over three zones, a new one per setting, where "+
			"fleetslice's manager and kube-controller-manager's own controller both write the EndpointSlices of one "+
			"Service, each its own set (told apart by `endpointslice.kubernetes.io/managed-by`): both see the very same "+
			"Pod changes at the same moments on the same loaded machine. A Service over a Deployment of %s Pods is "+
			"created, then rolled to a new template (maxSurge 25%%, maxUnavailable 25%%) %d times. Writes are the API "+
			"server's audit log of EndpointSlice writes (every request, rejected ones too, as `apiserver_request_total` "+
			"counts them) split by the writer's user agent. Converged is the time from the change until a controller's "+
			"slices list every Pod ready exactly once with nothing terminating (polled every %s); most of it is the "+
			"rollout's own pace, the same for both, so the table also gives when the Deployment first reported every "+
			"replica updated and ready and how long each controller's slices trailed it. Latency is the network "+
			"programming latency upstream defines for the controller: from a slice's "+
			"`endpoints.kubernetes.io/last-change-trigger-time` to the write reaching a watch, one sample per write "+
			"that carries a trigger time, as kube-proxy's SLI takes one per slice update it reads (the ratio table "+
			"also gives the p99 of each slice's first write of each trigger time alone, which leaves out the later, "+
			"slower writes of a controller that rewrites a slice with the same trigger time). Both controllers run "+
			"at their defaults in the headline settings: batch period 0, fleetslice with its adaptive coalescing "+
			"and client limits, kube-controller-manager with its own (20 requests per second, burst 30, shared by "+
			"all its controllers, unless the setting lifts them).",
			sz.nodes, bench.Count(int64(sz.pods)), len(results[0].sides[0].Rollouts), e2ebench.SettlePoll),
	}
	r.Tables = append(r.Tables, rolloutTable(sz, results), ratioTable(results), whyTable(results))
	for _, res := range results {
		if res.mem != nil {
			r.Tables = append(r.Tables, scaleTable(sz, res), memoryTable(sz, res.mem))
		}
	}
	r.Checks = checks(env, sz, results)
	if err := timelineFigure(env, sz, results[0], r); err != nil {
		return nil, err
	}
	r.Notes = []string{
		"Pod trigger times have the API's whole-second resolution (a Ready condition's lastTransitionTime, a " +
			"creationTimestamp), so every latency sample carries up to a second of rounding, for both controllers alike; " +
			"compare the two, not the absolute values.",
		"kube-controller-manager's rate-limiter wait is that of every controller in the process (client-go does not " +
			"tell them apart); fleetslice's is its member client's. Upstream's queue additions count every reason to " +
			"sync (Pod, Service and slice events, retries); fleetslice's count Pod changes that mattered to an endpoint. " +
			"Worker time per sync is each queue's workqueue_work_duration_seconds sum over its syncs: how long a sync " +
			"takes, the load fleetslice's coalescing window stretches with (its deferred wake-ups are in the sum and " +
			"take next to nothing).",
		"kube-controller-manager's memory includes every other controller; a second cluster, whose " +
			"kube-controller-manager runs without its EndpointSlice controller through the same steps (unmeasured), " +
			"gives the baseline: the difference estimates what the EndpointSlice controller and its informers add.",
		fmt.Sprintf("The write timeline counts the audit log's writes every %s.", e2ebench.TimelineStep),
	}
	return r, nil
}

func rolloutTable(sz sizes, results []settingResult) bench.Table {
	t := bench.Table{
		Caption: fmt.Sprintf("Rolling update of %s Pods, each run", bench.Count(int64(sz.pods))),
		Header: []string{"Setting", "Controller", "Writes per rollout", "Mean writes", "Converged", "Mean converged",
			"Deployment rolled (mean)", "Slices trailed it by (mean)", "Latency p50", "Latency p99", "Final slices",
			"Writes creating the Deployment", "Creation latency p99"},
	}
	for _, res := range results {
		for _, s := range res.sides {
			var writes, converged []string
			for _, p := range s.Rollouts {
				writes = append(writes, strconv.Itoa(e2ebench.TotalWrites(p.Writes)))
				converged = append(converged, seconds(p.Converged))
			}
			lat := pooledLatency(s.Rollouts)
			t.Rows = append(t.Rows, []string{res.name, s.Controller, strings.Join(writes, ", "), fmt.Sprintf("%.0f", meanWrites(s.Rollouts)),
				strings.Join(converged, ", "), seconds(meanConverged(s.Rollouts)), seconds(meanRolled(s.Rollouts)),
				seconds(meanTrail(s.Rollouts)), seconds(lat.Quantile(0.5)), seconds(lat.Quantile(0.99)),
				strconv.Itoa(s.Rollouts[len(s.Rollouts)-1].FinalSlices), strconv.Itoa(e2ebench.TotalWrites(s.Setup.Writes)),
				seconds(s.Setup.Latency.Quantile(0.99))})
		}
	}
	return t
}

func ratioTable(results []settingResult) bench.Table {
	t := bench.Table{
		Caption: "fleetslice / kube-controller-manager (below 1× means fleetslice did less, or was faster)",
		Header: []string{"Setting", "Rollout writes", "Converged", "Slices trailed the Deployment by", "Latency p50",
			"Latency p99", "Latency p99, first write of each trigger", "Writes creating the Deployment"},
	}
	for _, res := range results {
		ours, theirs := res.sides[0], res.sides[1]
		lo, lt := pooledLatency(ours.Rollouts), pooledLatency(theirs.Rollouts)
		fo, ft := pooledFirstLatency(ours.Rollouts), pooledFirstLatency(theirs.Rollouts)
		t.Rows = append(t.Rows, []string{res.name,
			bench.Ratio(meanWrites(ours.Rollouts), meanWrites(theirs.Rollouts)),
			bench.Ratio(float64(meanConverged(ours.Rollouts)), float64(meanConverged(theirs.Rollouts))),
			bench.Ratio(float64(meanTrail(ours.Rollouts)), float64(meanTrail(theirs.Rollouts))),
			bench.Ratio(float64(lo.Quantile(0.5)), float64(lt.Quantile(0.5))),
			bench.Ratio(float64(lo.Quantile(0.99)), float64(lt.Quantile(0.99))),
			bench.Ratio(float64(fo.Quantile(0.99)), float64(ft.Quantile(0.99))),
			bench.Ratio(float64(e2ebench.TotalWrites(ours.Setup.Writes)), float64(e2ebench.TotalWrites(theirs.Setup.Writes))),
		})
	}
	return t
}

// whyTable is what each controller's own counters say about its rollouts: how often it synced,
// how many changes each sync took in, and how long its requests queued behind its rate limiter.
func whyTable(results []settingResult) bench.Table {
	t := bench.Table{
		Caption: "Why: each controller's own counters, per rollout (mean over the runs)",
		Header: []string{"Setting", "Controller", "Syncs", "Syncs per second", "Sync requests per sync",
			"Stale-cache syncs", "Syncs that wrote nothing", "Deferred wake-ups", "Slices written per sync",
			"Worker time per sync", "Rate-limiter wait per rollout", "Requests that waited"},
	}
	for _, res := range results {
		for _, s := range res.sides {
			var st e2ebench.ControllerStats
			for _, p := range s.Rollouts {
				st = st.Add(p.Stats)
			}
			n := float64(len(s.Rollouts))
			unchanged := "not exposed"
			if st.Unchanged >= 0 {
				unchanged = fmt.Sprintf("%.0f", st.Unchanged/n)
			}
			t.Rows = append(t.Rows, []string{res.name, s.Controller,
				fmt.Sprintf("%.0f", st.Syncs/n),
				fmt.Sprintf("%.1f", st.Syncs/meanConverged(s.Rollouts).Seconds()/n),
				perSync(st.Queued, st.Syncs), fmt.Sprintf("%.0f", st.Stale/n), unchanged,
				fmt.Sprintf("%.0f", st.Deferred/n), perSync(st.SlicesChanged, st.Syncs), workPerSync(st),
				seconds(time.Duration(float64(st.LimiterWait) / n)), fmt.Sprintf("%.0f", st.LimitedRequests/n)})
		}
	}
	return t
}

// workPerSync is the mean time a sync held a worker, in milliseconds.
func workPerSync(st e2ebench.ControllerStats) string {
	if st.Syncs <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", float64(st.WorkTime.Milliseconds())/st.Syncs)
}

func scaleTable(sz sizes, res settingResult) bench.Table {
	t := bench.Table{
		Caption: fmt.Sprintf("Scale-up from %s to %s Pods (%s)", bench.Count(int64(sz.pods)), bench.Count(int64(sz.memoryPods)), res.name),
		Header:  []string{"Controller", "Writes", "Converged", "Latency p50", "Latency p99", "Final slices"},
	}
	for _, s := range res.sides {
		p := s.ScaleUp
		t.Rows = append(t.Rows, []string{s.Controller, strconv.Itoa(e2ebench.TotalWrites(p.Writes)), seconds(p.Converged),
			seconds(p.Latency.Quantile(0.5)), seconds(p.Latency.Quantile(0.99)), strconv.Itoa(p.FinalSlices)})
	}
	return t
}

func memoryTable(sz sizes, mem *memory) bench.Table {
	t := bench.Table{
		Caption: "Resident memory",
		Header:  []string{"Process", "Cluster", "Runs", fmt.Sprintf("RSS at %s Pods", bench.Count(int64(sz.pods))), fmt.Sprintf("RSS at %s Pods", bench.Count(int64(sz.memoryPods)))},
	}
	for _, m := range mem.rows {
		t.Rows = append(t.Rows, []string{m.process, m.cluster, m.role, mib(m.afterRollout), mib(m.atScale)})
	}
	ours, without, with := mem.rows[0], mem.rows[1], mem.rows[2]
	share := with.atScale - without.atScale
	t.Rows = append(t.Rows,
		[]string{"kube-controller-manager difference", with.cluster + " - " + without.cluster,
			"what its EndpointSlice controller adds (estimate)", mib(with.afterRollout - without.afterRollout), mib(share)},
		[]string{"fleetslice / kube-controller-manager", "", "whole process; its EndpointSlice share", "",
			bench.Ratio(float64(ours.atScale), float64(with.atScale)) + "; " + ratioOrNA(float64(ours.atScale), float64(share))})
	return t
}

func timelineFigure(env bench.Env, sz sizes, res settingResult, r *bench.Report) error {
	path, link, ok := env.Figure("endpointslice-e2e-rollout-writes.svg")
	if !ok {
		return nil
	}
	var lines []bench.Line
	for _, s := range res.sides {
		l := bench.Line{Name: s.Controller}
		for _, p := range s.Rollouts[0].Timeline {
			l.Points = append(l.Points, bench.Point{X: p.At.Seconds(), Y: float64(p.Writes)})
		}
		lines = append(lines, l)
	}
	title := fmt.Sprintf("Rolling update of %s Pods at defaults: cumulative EndpointSlice writes", bench.Count(int64(sz.pods)))
	if err := bench.WriteLineChart(path, title, "seconds since the template changed", "writes", lines); err != nil {
		return err
	}
	r.Figures = append(r.Figures, bench.Figure{Path: path, Link: link, Caption: title + ", first run, kube-controller-manager and fleetslice"})
	return nil
}

func meanWrites(ps []e2ebench.Phase) float64 {
	total := 0
	for _, p := range ps {
		total += e2ebench.TotalWrites(p.Writes)
	}
	return float64(total) / float64(len(ps))
}

func meanConverged(ps []e2ebench.Phase) time.Duration {
	return meanOf(ps, func(p e2ebench.Phase) time.Duration { return p.Converged })
}

func meanRolled(ps []e2ebench.Phase) time.Duration {
	return meanOf(ps, func(p e2ebench.Phase) time.Duration { return p.Rolled })
}

// meanTrail is how long, on average, the slices took to show a rollout after the Deployment had
// finished it: the part of the convergence time the EndpointSlice controller answers for.
func meanTrail(ps []e2ebench.Phase) time.Duration {
	return meanOf(ps, func(p e2ebench.Phase) time.Duration { return p.Converged - p.Rolled })
}

func meanOf(ps []e2ebench.Phase, of func(e2ebench.Phase) time.Duration) time.Duration {
	var total time.Duration
	for _, p := range ps {
		total += of(p)
	}
	return total / time.Duration(len(ps))
}

// pooledLatency pools the phases' latencies, one sample per write that carried a trigger time.
func pooledLatency(ps []e2ebench.Phase) e2ebench.Latencies {
	return pooled(ps, func(p e2ebench.Phase) e2ebench.Latencies { return p.Latency })
}

// pooledFirstLatency pools each slice's first write of each trigger time only.
func pooledFirstLatency(ps []e2ebench.Phase) e2ebench.Latencies {
	return pooled(ps, func(p e2ebench.Phase) e2ebench.Latencies { return p.FirstLatency })
}

func pooled(ps []e2ebench.Phase, of func(e2ebench.Phase) e2ebench.Latencies) e2ebench.Latencies {
	var out e2ebench.Latencies
	for _, p := range ps {
		out = append(out, of(p)...)
	}
	return out
}

func perSync(n, syncs float64) string {
	if syncs == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", n/syncs)
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// ratioOrNA guards against a difference that noise made zero or negative.
func ratioOrNA(ours, theirs float64) string {
	if theirs <= 0 {
		return "n/a (no measurable difference)"
	}
	return bench.Ratio(ours, theirs)
}
