package mcsbench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

// floorBound is the target for a bulk start and a join: within this multiple of the API
// servers' write floor measured in the same run. The machine's speed divides out of the ratio,
// where an absolute bound in seconds measured the member API servers' CPU instead.
const floorBound = 1.5

// joinPropagationBound is how late a single change may arrive while another member bulk syncs.
const joinPropagationBound = time.Second

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func msOf(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}

// perExport is writes per exported Service, by resource, as "resource verb n" sorted.
func perExport(w apimetrics.Writes, exports int) string {
	var parts []string
	for k, n := range w.Served {
		parts = append(parts, fmt.Sprintf("%s %s %.2f", k.Resource, k.Verb, float64(n)/float64(exports)))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func sumWrites(ws []apimetrics.Writes) int {
	n := 0
	for _, w := range ws {
		n += w.Total()
	}
	return n
}

// fleetTables reports the fleet runs: convergence and scale, writes per export, and checks.
func fleetTables(runs []*fleetResult) ([]bench.Table, []bench.Check) {
	scale := bench.Table{
		Caption: "Fleet scale on light members: bulk convergence, single changes, a lost and a joining member",
		Header: []string{"Members x exported Services", "All managers start -> all imported (x write floor)", "One member joins -> all imported (x write floor)",
			"Single change p50 / p99", "p99 while a member joins", "Lease expiry -> lost member withdrawn (max)",
			"Broker objects", "Broker watch events / KiB per change", "Broker kube-apiserver RSS / CPU", "Broker etcd RSS / CPU", "Manager RSS (max)",
			"CPU in the bulk start: managers / member API servers / member etcds", "API servers and etcds CPU: bulk start / its floor",
			"CPU in the join: API servers and etcds (x its floor's) / managers"},
	}
	writes := bench.Table{
		Caption: "Writes during the bulk start, counted at each API server, per exported Service",
		Header: []string{"Members x exported Services", "Where", "Writes",
			"Per imported Service (members) or export (broker), the API server's own writes left out", "Per own export (its status)", "Lease renewals",
			"The API server's own writes (not per import): its controllers' Events / its allocator's refused IPAddress creates", "By resource and verb, per Service"},
	}
	var checks []bench.Check
	for _, r := range runs {
		size := fmt.Sprintf("%d x %s", r.Members, bench.Count(int64(r.Services)))
		exports := r.Members * r.Services
		objects := fmt.Sprintf("%d records, %d slices, %d Leases", r.BrokerObjects["ServiceExportRecord"], r.BrokerObjects["EndpointSlice"], r.BrokerObjects["Lease"])
		scale.Rows = append(scale.Rows, []string{
			size, versusFloor(r.Bulk, r.BulkFloor), versusFloor(r.Join, r.JoinFloor),
			msOf(e2ebench.Percentile(r.Propagation, 50)) + " / " + msOf(e2ebench.Percentile(r.Propagation, 99)),
			msOf(e2ebench.Percentile(r.JoinPropagation, 99)),
			msOf(slices.Max(append([]time.Duration{0}, r.Withdrawal...))),
			objects,
			fmt.Sprintf("%.1f / %.1f", r.WatchEventsPerChange, r.WatchBytesPerChange/1024),
			mib(r.BrokerAPIServerRSS) + " / " + r.BrokerAPIServerCPU.Round(100*time.Millisecond).String(),
			mib(r.BrokerEtcdRSS) + " / " + r.BrokerEtcdCPU.Round(100*time.Millisecond).String(),
			mib(slices.Max(append([]int64{0}, r.ManagerRSS...))),
			fmt.Sprintf("%s / %s / %s", r.ManagersCPU.Round(100*time.Millisecond), r.MemberAPIServersCPU.Round(100*time.Millisecond), r.MemberEtcdsCPU.Round(100*time.Millisecond)),
			versusFloor(r.BulkCPU, r.BulkFloorCPU),
			versusFloor(r.JoinCPU, r.JoinFloorCPU) + " / " + r.JoinManagersCPU.Round(100*time.Millisecond).String(),
		})
		for i, w := range r.BulkWrites {
			where, per := "broker", exports
			if i > 0 {
				where, per = fmt.Sprintf("member-%02d", i-1), r.Services
			}
			if i > 2 && i < len(r.BulkWrites)-1 {
				continue // members look alike; the first two and the last stand for them
			}
			imports, exports, leases := r.ourWrites(i)
			own := "–"
			if i > 0 {
				own = fmt.Sprintf("%.2f", twoDecimals(float64(exports)/float64(per)))
			}
			writes.Rows = append(writes.Rows, []string{size, where, strconv.Itoa(w.Total()),
				fmt.Sprintf("%.2f", twoDecimals(float64(imports)/float64(per))), own, strconv.Itoa(leases),
				fmt.Sprintf("%d / %d", r.othersEvents(i), r.refusedAllocations(i)), perExport(w, per)})
		}
		checks = append(checks, fleetChecks(r)...)
	}
	return []bench.Table{scale, writes, comebackTable(runs)}, checks
}

// importWritesBesidesSlices is what a member may write per imported Service in a bulk start
// besides one imported slice per exporter: the derived Service, the IPAddress its API server
// allocates, the ServiceImport and its status (7 in all with 3 exporters). Its own export's
// status is one write per export, held apart.
const importWritesBesidesSlices = 4

// othersEvents is what cluster i (broker first) wrote as Events for the API server's own
// controllers, none where they were not counted.
func (r *fleetResult) othersEvents(i int) int {
	if i < len(r.OthersEvents) {
		return r.OthersEvents[i]
	}
	return 0
}

// refusedAllocations is how many IPAddress creates cluster i's API server refused with 409 in
// the bulk start: its own allocator's, which creates a Service's IPAddress and tries another
// address when two allocations raced for one. fleetslice creates the Service once either way.
func (r *fleetResult) refusedAllocations(i int) int {
	return r.BulkWrites[i].Conflicts[apimetrics.Write{Resource: "ipaddresses", Verb: "create"}]
}

// ourWrites is splitWrites of cluster i's bulk-start writes (broker first), the API server's
// own writes (its controllers' Events, its allocator's refused IPAddress creates) left out of
// its imports: what the table shows and the check holds.
func (r *fleetResult) ourWrites(i int) (imports, exports, leases int) {
	imports, exports, leases = splitWrites(r.BulkWrites[i])
	return imports - r.othersEvents(i) - r.refusedAllocations(i), exports, leases
}

// splitWrites parts a cluster's writes into what its imports (or, on the broker, its peers'
// exports) cost, its own exports' status writes, and Lease renewals.
func splitWrites(w apimetrics.Writes) (imports, exports, leases int) {
	for k, n := range w.Served {
		switch k.Resource {
		case "leases":
			leases += n
		case "serviceexports/status":
			exports += n
		default:
			imports += n
		}
	}
	return imports, exports, leases
}

// writesCheck holds each member to one slice per exporter and importWritesBesidesSlices per
// imported Service and one status write per own export, every request counted (retries refused
// with 409 included; the API server's own writes, its controllers' Events such as its ClusterIP
// repairs and its allocator's refused IPAddress creates, left out), as the table shows them: to
// two decimals.
func writesCheck(r *fleetResult, size string) bench.Check {
	bound := float64(r.Members + importWritesBesidesSlices)
	c := bench.Check{Name: fmt.Sprintf("%s: each member writes at most %.0f times per imported Service and once per own export's status", size, bound)}
	var over []string
	for i := range r.BulkWrites[1:] {
		imports, exports, _ := r.ourWrites(i + 1)
		if per := float64(imports) / float64(r.Services); twoDecimals(per) > bound {
			over = append(over, fmt.Sprintf("member-%02d %.2f per import", i, twoDecimals(per)))
		}
		if per := float64(exports) / float64(r.Services); twoDecimals(per) > 1 {
			over = append(over, fmt.Sprintf("member-%02d %.2f per export", i, twoDecimals(per)))
		}
	}
	if len(over) > 0 {
		c.Failure = strings.Join(over, ", ")
	}
	return c
}

// twoDecimals rounds half away from zero, where %.2f alone would print 7.005 as 7.00 (its
// nearest binary value is below): the table and the check show the same number.
func twoDecimals(x float64) float64 { return math.Round(x*100) / 100 }

func fleetChecks(r *fleetResult) []bench.Check {
	size := fmt.Sprintf("%d members x %d Services", r.Members, r.Services)
	restart := bench.Check{Name: size + ": a restart of every manager with nothing changed writes nothing but Lease renewals"}
	if n := sumWrites(r.RestartWrites); n > 0 {
		var seen []string
		for i, w := range r.RestartWrites {
			if w.Total() > 0 {
				seen = append(seen, fmt.Sprintf("cluster %d: %s", i, perExport(w, 1)))
			}
		}
		restart.Failure = fmt.Sprintf("%d writes: %s", n, strings.Join(seen, "; "))
	}
	arrived := bench.Check{Name: size + ": every single change reached every other member, also while a member joined"}
	if r.Missing > 0 || r.JoinMissing > 0 || len(r.Propagation) == 0 || len(r.JoinPropagation) == 0 {
		arrived.Failure = fmt.Sprintf("%d and %d arrivals missing", r.Missing, r.JoinMissing)
	}
	fair := bench.Check{Name: fmt.Sprintf("%s: while a member bulk syncs, single changes between others arrive within %s (p99)", size, joinPropagationBound)}
	if p := e2ebench.Percentile(r.JoinPropagation, 99); p > joinPropagationBound {
		fair.Failure = fmt.Sprintf("p99 %s", p)
	}
	checks := append([]bench.Check{restart, arrived}, comebackChecks(r, size)...)
	// Times are claims about full-size runs only; quick runs check what cannot depend on speed.
	if r.Services >= fullFleetServices {
		checks = append(checks, fair)
	}
	// Counted at the API servers, stray writes are a larger share of a quick run's few imports.
	if r.Services >= fullFleetServices {
		checks = append(checks, writesCheck(r, size), floorCheck(size+": bulk start", r.Bulk, r.BulkFloor), floorCheck(size+": one member joining", r.Join, r.JoinFloor))
	}
	return checks
}

// versusFloor reads "2m0s (1.42x of 1m24.5s)".
func versusFloor(took, floor time.Duration) string {
	out := took.Round(100 * time.Millisecond).String()
	if floor > 0 {
		out += fmt.Sprintf(" (%.2fx of %s)", took.Seconds()/floor.Seconds(), roundFloor(floor))
	}
	return out
}

// roundFloor keeps two digits of a floor below a second, where 100 ms steps would hide it.
func roundFloor(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

func floorCheck(what string, took, floor time.Duration) bench.Check {
	return boundCheck(what, "the API servers' write floor measured in the same run", took, floor)
}

// boundCheck asserts took within floorBound times floor, which floorWhat describes.
func boundCheck(what, floorWhat string, took, floor time.Duration) bench.Check {
	c := bench.Check{Name: fmt.Sprintf("%s within %.1fx of %s", what, floorBound, floorWhat)}
	if floor <= 0 || took.Seconds() > floorBound*floor.Seconds() {
		c.Failure = fmt.Sprintf("took %s against a floor of %s", took.Round(100*time.Millisecond), floor.Round(100*time.Millisecond))
	}
	return c
}

func fleetNote(lease time.Duration, managerArgs []string) string {
	flags := "at their defaults"
	if len(managerArgs) > 0 {
		flags = "with " + strings.Join(managerArgs, " ") + " (tuned, not the defaults)"
	}
	return fmt.Sprintf("Light members are etcd and kube-apiserver only (envtest control planes), each exporting "+
		"selector-less Services with one hand-written EndpointSlice of one ready endpoint; one manager process per "+
		"member, %s (lease %s). Every member imports every member's endpoints of every Service. Phases, in order: "+
		"every manager started at once; every manager restarted with nothing changed (writes counted for 15 s after "+
		"each had renewed its Lease); single changes (a second endpoint in the first member's slice) timed by watches "+
		"in every other member; the last member's manager stopped (withdrawal timed from its Lease expiry); that member "+
		"removed for good and started again (a join), while single changes between the first two members are timed. "+
		"Writes are counted at each API server (apiserver_request_total) and include Lease renewals and Events; "+
		"broker watch bytes are apiserver_watch_events_sizes over the single changes, Lease renewals included. "+
		"CPU is the broker's processes' over the bulk start. The write floors are timed before any manager starts: "+
		"plain clients without a rate limit, 16 per API server, all API servers at once, write what the phase makes "+
		"the set write, in a namespace of their own: for the bulk start every export's broker record and slice copy, "+
		"every import (derived Service, ServiceImport and its status, one slice per exporter) and every export's "+
		"status; for the join the newcomer's records, copies and imports, and in each peer its imported slice and "+
		"one status update of each existing ServiceImport (the newcomer's exports keep the status they had; the "+
		"peers' imports of each other are written untimed first). The floors' objects are made by fleetslice's own "+
		"builders (record, slice copy, import plan) from the workload as the API servers hold it, so they carry "+
		"the labels, owner references and conditions fleetslice's objects carry; a test holds them to the same "+
		"fields and sizes as a converged set's.", flags, lease)
}
