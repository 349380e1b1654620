package datapathbench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

// sloBound is Kubernetes' network programming latency SLO (p99 at most 30 s, measured from a
// Service or Pod change to every Node's rules), the published bound the figures are held to.
const sloBound = 30 * time.Second

func report(s setup, figs []sizeFigures) *bench.Report {
	r := &bench.Report{
		Intro: fmt.Sprintf("A local ClusterSet of two kwok members with %d Nodes each and the real pod network "+
			"(`make run`'s data path): every Node is a network namespace whose fleetslice agent programs its "+
			"nftables, every running Pod a namespace running its command, and the members' Pod ranges are routed "+
			"to each other. The fleetslice manager runs in each member. The exporting member (cluster-1) holds "+
			"one exported Service `probe` with one Pod that stays ready, plus the size's background Services, "+
			"each exported with two endpoints in a slice the bench writes itself. Each client Pod opens a new TCP "+
			"connection every %s from its own namespace, as an application would: cluster-1's client to the "+
			"Service's ClusterIP (the in-cluster anchor: the same agent's rules with no ClusterSet in the path), "+
			"cluster-2's client to the ClusterSet IP of its ServiceImport. Each sample adds a Pod to `probe` that "+
			"starts not ready, makes it ready through its readiness probe, waits until both clients have reached "+
			"it, makes it not ready and waits until both have gone %s without reaching it. %d samples per size.",
			s.nodes, s.pause, s.quiet, s.samples),
	}
	setupTable := bench.Table{
		Caption: "The ClusterSet's size: exported Services, and how long cluster-2 took to hold all their imports",
		Header:  []string{"Exported Services", "Imported with ClusterSet IP and slices in"},
	}
	paths := bench.Table{
		Caption: "Pod Ready written -> first answered connection, and not-ready written -> no new connection reaches it",
		Header: []string{"Exported Services", "Client -> address", "Samples", "Ready: p50", "Ready: p90", "Ready: p99",
			"Not ready: p50", "Not ready: p90", "Not ready: p99", "Never seen", "Connections (failed)"},
	}
	for _, f := range figs {
		setupTable.Rows = append(setupTable.Rows, []string{bench.Count(int64(f.Services)), seconds(f.Settled)})
		for _, p := range []struct {
			name string
			figs pathFigures
		}{{"in-cluster: cluster-1 -> ClusterIP", f.InCluster}, {"cross-cluster: cluster-2 -> ClusterSet IP", f.CrossCluster}} {
			paths.Rows = append(paths.Rows, []string{
				bench.Count(int64(f.Services)), p.name, strconv.Itoa(len(p.figs.Ready)),
				ms(e2ebench.Percentile(p.figs.Ready, 50)), ms(e2ebench.Percentile(p.figs.Ready, 90)), ms(e2ebench.Percentile(p.figs.Ready, 99)),
				ms(e2ebench.Percentile(p.figs.Stopped, 50)), ms(e2ebench.Percentile(p.figs.Stopped, 90)), ms(e2ebench.Percentile(p.figs.Stopped, 99)),
				strconv.Itoa(p.figs.MissingReady + p.figs.MissingStopped),
				fmt.Sprintf("%s (%d)", bench.Count(int64(p.figs.Requests)), p.figs.Failed),
			})
			r.Checks = append(r.Checks, pathChecks(s, f.Services, p.name, p.figs)...)
		}
	}
	r.Tables = []bench.Table{setupTable, paths}
	r.Notes = []string{
		"Both clocks start when the Pod's Ready condition changed as a watch on cluster-1's API server saw it, " +
			"and stop at the start of the first connection that shows the change: the first one the new Pod " +
			"answered, or the first one after its last answer. The resolution is the pause between connections " +
			"plus one connection's time. Percentiles are nearest-rank: with 20 samples p99 is the slowest. No peer project publishes a cross-cluster figure to set beside these; " +
			"the in-cluster row is the anchor, and Kubernetes' network programming latency SLO (p99 at most 30 s " +
			"from a change to every Node's rules) the published bound.",
		"The cross-cluster path crosses both members: cluster-1's manager writes the Pod's EndpointSlice, " +
			"cluster-2's manager imports it into a slice of the ServiceImport, and cluster-2's agents program the " +
			"ClusterSet IP. The background Services' endpoints exist only in their slices; no connection goes to them. " +
			"cluster-1 imports what it exports too, as every member does, so its Nodes program each background " +
			"Service twice (ClusterIP and ClusterSet IP) where cluster-2's program it once, and its API server " +
			"also serves the exports: the in-cluster anchor runs on the busier member.",
		"\"Never seen\" counts samples where a client did not show a change within the answer timeout; " +
			"\"failed\" counts connections that got no answer at all (none should: the first Pod always answers).",
	}
	return r
}

// pathChecks: every sample was seen by the client both ways, within the SLO's bound.
func pathChecks(s setup, services int, path string, p pathFigures) []bench.Check {
	seen := bench.Check{Name: fmt.Sprintf("%d exported Services, %s: every ready Pod answered and every not-ready Pod stopped being reached", services, path)}
	switch {
	case p.MissingReady > 0:
		seen.Failure = fmt.Sprintf("%d of %d ready Pods never answered within %s", p.MissingReady, s.samples, s.answerTimeout)
	case p.MissingStopped > 0:
		seen.Failure = fmt.Sprintf("%d of %d not-ready Pods were still reached after %s", p.MissingStopped, s.samples, s.answerTimeout)
	case len(p.Ready) != s.samples:
		seen.Failure = fmt.Sprintf("%d of %d samples measured", len(p.Ready), s.samples)
	}
	bound := bench.Check{Name: fmt.Sprintf("%d exported Services, %s: every change took effect within %s", services, path, sloBound)}
	if worst := max(e2ebench.Percentile(p.Ready, 100), e2ebench.Percentile(p.Stopped, 100)); worst > sloBound {
		bound.Failure = fmt.Sprintf("the slowest took %s", worst.Round(time.Millisecond))
	}
	return []bench.Check{seen, bound}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
