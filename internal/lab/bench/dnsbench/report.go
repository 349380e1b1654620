package dnsbench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

// plugins names who answers each zone.
var plugins = map[string]string{
	"clusterset.local": "fleetslice clusterset",
	"cluster.local":    "CoreDNS kubernetes",
}

func report(s settings, runs []sizeRun) *bench.Report {
	r := &bench.Report{
		Intro: fmt.Sprintf("One fleetslice-dns process (CoreDNS v1.15.0 with the clusterset plugin, the binary `make build` "+
			"writes) serves both zones on one loopback port from one envtest API server: `clusterset.local` with "+
			"fleetslice's clusterset plugin, `cluster.local` with CoreDNS's kubernetes plugin, nothing else in a "+
			"query's path (no cache, no log). For each size there are as many Services (ClusterIPs allocated by the "+
			"API server) as ClusterSetIP ServiceImports of the same names, written directly. The load generator is "+
			"our own Go client (miekg/dns), in the bench process: %d clients, each with its own UDP socket, ask for "+
			"the A record of a random name of the zone and wait for the answer before asking again, for %s per zone "+
			"and round, %d round(s) with the zones' order alternating. Every answer is checked: NOERROR and exactly "+
			"the one address of that Service or import. Then %d new Services and ServiceImports are created one at a "+
			"time and each name is asked for every millisecond until it answers its address.",
			s.workers, s.duration, s.rounds, s.samples),
	}
	load := bench.Table{
		Caption: "Queries: A records of random names of the zone, closed loop",
		Header:  []string{"Services", "Zone (plugin)", "Answered", "Queries/s", "p50", "p99", "Wrong or lost", "Queries/s vs kubernetes"},
	}
	prop := bench.Table{
		Caption: "New object -> its name resolves (polled every millisecond)",
		Header:  []string{"Services", "Zone (object)", "Samples", "p50 after stored", "max after stored", "p50 after the create call", "max after the create call", "Never resolved"},
	}
	for _, run := range runs {
		byZone := map[string]*LoadResult{}
		for i := range run.zones {
			byZone[run.zones[i].zone] = &run.zones[i].result
		}
		for _, z := range run.zones {
			res := &z.result
			load.Rows = append(load.Rows, []string{
				bench.Count(int64(run.services)), z.zone + " (" + plugins[z.zone] + ")", bench.Count(int64(len(res.Latencies))),
				bench.Count(int64(res.QPS())), micros(e2ebench.Percentile(res.Latencies, 50)), micros(e2ebench.Percentile(res.Latencies, 99)),
				strconv.Itoa(res.Wrong + res.Lost), bench.Ratio(res.QPS(), byZone["cluster.local"].QPS()),
			})
			r.Checks = append(r.Checks, answeredCheck(run.services, z))
		}
		for _, p := range []struct {
			zone string
			p    *propagation
		}{{"clusterset.local (ServiceImport)", run.clusterset}, {"cluster.local (Service)", run.cluster}} {
			prop.Rows = append(prop.Rows, []string{
				bench.Count(int64(run.services)), p.zone, strconv.Itoa(len(p.p.FromStored)),
				ms(e2ebench.Percentile(p.p.FromStored, 50)), ms(e2ebench.Percentile(p.p.FromStored, 100)),
				ms(e2ebench.Percentile(p.p.FromCall, 50)), ms(e2ebench.Percentile(p.p.FromCall, 100)), strconv.Itoa(p.p.Missing),
			})
		}
		r.Checks = append(r.Checks, propagationCheck(run.services, run.clusterset))
	}
	r.Tables = []bench.Table{load, prop}
	r.Notes = []string{
		"Server and load generator share the machine's cores, so queries per second are what one process answers " +
			"while another asks, the same for both zones. p50 and p99 are per query, from sending it to reading its answer.",
		"\"After stored\" starts when the API server has accepted the create; \"after the create call\" includes " +
			"the API write. The sizes count the loaded Services; the timed new ones come on top (a few per size).",
	}
	return r
}

// answeredCheck: every query of the zone got exactly its address, and some were asked.
func answeredCheck(services int, z zoneRun) bench.Check {
	c := bench.Check{Name: fmt.Sprintf("%d Services, %s: every query answered with its one address", services, z.zone)}
	res := &z.result
	switch {
	case len(res.Latencies) == 0:
		c.Failure = "no query was answered correctly"
	case res.Wrong > 0:
		c.Failure = fmt.Sprintf("%d of %d answers wrong, first: %s", res.Wrong, res.Sent, res.FirstWrong)
	case res.Lost > 0:
		c.Failure = fmt.Sprintf("%d of %d queries got no answer within a second", res.Lost, res.Sent)
	}
	return c
}

// propagationCheck: every new ServiceImport's name resolved within a second of being stored.
func propagationCheck(services int, p *propagation) bench.Check {
	c := bench.Check{Name: fmt.Sprintf("%d Services: every new ServiceImport resolves within %s of being stored", services, propagationLimit)}
	switch {
	case p.Missing > 0:
		c.Failure = fmt.Sprintf("%d never resolved: %s", p.Missing, p.FirstMissing)
	case len(p.FromStored) == 0:
		c.Failure = "no ServiceImport was timed"
	case e2ebench.Percentile(p.FromStored, 100) >= propagationLimit:
		c.Failure = fmt.Sprintf("the slowest took %s", e2ebench.Percentile(p.FromStored, 100))
	}
	return c
}

func micros(d time.Duration) string { return bench.Micros(float64(d) / float64(time.Microsecond)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
