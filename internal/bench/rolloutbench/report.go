package rolloutbench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fleetslice/fleetslice/internal/bench"
	"github.com/fleetslice/fleetslice/internal/e2ebench"
)

func buildReport(env bench.Env, sz sizes, batch time.Duration, sides []e2ebench.Side, mem *memory) (*bench.Report, error) {
	ours, theirs := sides[0], sides[1]
	r := &bench.Report{
		Intro: fmt.Sprintf("Two simulated clusters of the local ClusterSet (kwok Nodes, real kube-apiserver, "+
			"kube-controller-manager and kube-scheduler), %d Nodes each over three zones. In %s fleetslice's manager "+
			"writes the EndpointSlices (kube-controller-manager runs with `-endpointslice-controller`); in %s "+
			"kube-controller-manager's own EndpointSlice controller does. Both get batch period %s and no client-side "+
			"QPS limits. The same Deployment of %s Pods behind one Service is rolled to a new template "+
			"(maxSurge 25%%, maxUnavailable 0); writes are each API server's `apiserver_request_total` for "+
			"endpointslices by verb, during the rollout only. Converged is the time from changing the template until "+
			"every new Pod is listed ready exactly once with nothing terminating. Then both Deployments are scaled to "+
			"%s Pods and each controller process's resident memory (VmRSS) is read.",
			sz.nodes, ours.Cluster, theirs.Cluster, batch, bench.Count(int64(sz.pods)), bench.Count(int64(sz.memoryPods))),
	}

	rollout := bench.Table{
		Caption: fmt.Sprintf("Rolling update of %s Pods", bench.Count(int64(sz.pods))),
		Header:  []string{"Controller", "Cluster", "Creates", "Updates", "Deletes", "Total writes", "Conflicts (409)", "Peak slices", "Final slices", "Converged", "Writes to come up"},
	}
	for _, s := range sides {
		rollout.Rows = append(rollout.Rows, []string{
			s.Controller, s.Cluster,
			strconv.Itoa(s.Writes["create"]), strconv.Itoa(s.Writes["update"] + s.Writes["patch"]), strconv.Itoa(s.Writes["delete"]),
			strconv.Itoa(e2ebench.TotalWrites(s.Writes)), strconv.Itoa(s.Writes["conflict"]),
			strconv.Itoa(s.PeakSlices), strconv.Itoa(s.FinalSlices),
			s.Converged.Round(100 * time.Millisecond).String(), strconv.Itoa(e2ebench.TotalWrites(s.SetupWrites)),
		})
	}

	memTable := bench.Table{
		Caption: "Resident memory",
		Header:  []string{"Process", "Cluster", "Runs", fmt.Sprintf("RSS at %s Pods", bench.Count(int64(sz.pods))), fmt.Sprintf("RSS at %s Pods", bench.Count(int64(sz.memoryPods)))},
	}
	for _, m := range mem.rows {
		memTable.Rows = append(memTable.Rows, []string{m.process, m.cluster, m.role, mib(m.afterRollout), mib(m.atScale)})
	}
	ourMem, without, with := mem.rows[0], mem.rows[1], mem.rows[2]
	share := with.atScale - without.atScale
	memTable.Rows = append(memTable.Rows, []string{"kube-controller-manager difference", with.cluster + " - " + without.cluster,
		"what its EndpointSlice controller adds (estimate)", mib(with.afterRollout - without.afterRollout), mib(share)})

	ratios := bench.Table{
		Caption: "fleetslice / kube-controller-manager (below 1× means fleetslice did less)",
		Header:  []string{"Writes", "Final slices", "Peak slices", "Converged", "RSS vs whole kube-controller-manager", "RSS vs its EndpointSlice share"},
		Rows: [][]string{{
			bench.Ratio(float64(e2ebench.TotalWrites(ours.Writes)), float64(e2ebench.TotalWrites(theirs.Writes))),
			bench.Ratio(float64(ours.FinalSlices), float64(theirs.FinalSlices)),
			bench.Ratio(float64(ours.PeakSlices), float64(theirs.PeakSlices)),
			bench.Ratio(float64(ours.Converged), float64(theirs.Converged)),
			bench.Ratio(float64(ourMem.atScale), float64(with.atScale)),
			ratioOrNA(float64(ourMem.atScale), float64(share)),
		}},
	}
	r.Tables = []bench.Table{rollout, ratios, memTable}
	r.Checks = checks(sz, sides)

	if path, link, ok := env.Figure("endpointslice-e2e-rollout-writes.svg"); ok {
		var lines []bench.Line
		for _, s := range sides {
			l := bench.Line{Name: s.Controller}
			for _, p := range s.Timeline {
				l.Points = append(l.Points, bench.Point{X: p.At.Seconds(), Y: float64(p.Writes)})
			}
			lines = append(lines, l)
		}
		title := fmt.Sprintf("Rolling update of %s Pods: cumulative EndpointSlice writes", bench.Count(int64(sz.pods)))
		if err := bench.WriteLineChart(path, title, "seconds since the template changed", "writes", lines); err != nil {
			return nil, err
		}
		r.Figures = append(r.Figures, bench.Figure{Path: path, Link: link, Caption: title + ", kube-controller-manager and fleetslice"})
	}

	r.Notes = []string{
		"kube-controller-manager runs its EndpointSlice controller in one process with the ReplicaSet, Deployment " +
			"and garbage-collector controllers that drive the same rollout, so its syncs may start later and cover more " +
			"changes each; fleetslice runs alone. With batch period 0 (both controllers' default) that gap favours " +
			"kube-controller-manager's write count; run `fleetslice bench endpointslice-e2e --endpointslice-e2e-batch-period 0` to see it.",
		"kube-controller-manager's memory includes every other controller; the difference between the two " +
			"clusters' kube-controller-managers estimates what its EndpointSlice controller and its informers add, " +
			"within the noise of Go's heap sizing.",
		fmt.Sprintf("The write timeline is sampled from the API server's counters every %s.", e2ebench.TimelineStep),
	}
	return r, nil
}

func checks(sz sizes, sides []e2ebench.Side) []bench.Check {
	var out []bench.Check
	for _, s := range sides {
		out = append(out, bench.Check{
			Name: fmt.Sprintf("%s converged: every one of %d new Pods listed ready exactly once, and at %d after scaling",
				s.Controller, sz.pods, sz.memoryPods),
		})
		c := bench.Check{Name: s.Controller + ": the API server counted writes, and the timeline never exceeds them nor goes down"}
		all, last := e2ebench.TotalWrites(s.Writes), 0
		for _, p := range s.Timeline {
			if p.Writes < last || p.Writes > all {
				c.Failure = fmt.Sprintf("timeline point %d at %s against %d writes in all", p.Writes, p.At, all)
				break
			}
			last = p.Writes
		}
		if all == 0 {
			c.Failure = "no EndpointSlice writes counted during the rollout"
		}
		out = append(out, c)
	}
	limit := (sz.pods+99)/100 + 1
	c := bench.Check{Name: fmt.Sprintf("fleetslice ends with at most ceil(Pods/100)+1 = %d slices", limit)}
	if sides[0].FinalSlices > limit {
		c.Failure = fmt.Sprintf("%d slices", sides[0].FinalSlices)
	}
	return append(out, c)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// ratioOrNA guards against a difference that noise made zero or negative.
func ratioOrNA(ours, theirs float64) string {
	if theirs <= 0 {
		return "n/a (no measurable difference)"
	}
	return bench.Ratio(ours, theirs)
}
