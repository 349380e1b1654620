// Package mcsbench is the `multicluster` part of `fleetslice bench`: on a fresh local ClusterSet per
// size, how fast a new ready endpoint reaches every other member's imported EndpointSlices, and
// how fast a lost member's endpoints are withdrawn after its Lease expires.
package mcsbench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

type settings struct {
	services    []int
	samples     int
	nodes       int
	lease       time.Duration
	clusters    int
	headless    bool
	changeEvery time.Duration
	timeout     time.Duration
	seed        uint64
	// fleetMembers are the sizes of the light-member ClusterSets, each exporting fleetServices
	// Services per member; fleetOnly skips the kwok ClusterSets.
	fleetMembers  []int
	fleetServices int
	fleetOnly     bool
	fleetLease    time.Duration
	managerArgs   []string
	// fleetChanges are made in the light members while the broker is down for fleetOutage.
	fleetChanges int
	fleetOutage  time.Duration
	fleetProfile string
	fleetLogs    string
}

var (
	fullServices = []int{100, 1000}
	// Quick measures one small size: every extra size costs a whole ClusterSet.
	quickServices = []int{20}
	quickLease    = 4 * time.Second
	fullFleet     = []int{3, 10}
	quickFleet    = []int{3}
)

const (
	fullFleetServices  = 1000
	quickFleetServices = 30
	// The broker's comeback: changes made while it is down, and how long it is down (issue #38:
	// 1,000 changes queued over 60 s); quick runs keep a handful over a short outage.
	fullFleetChanges  = 1000
	quickFleetChanges = 10
	fullFleetOutage   = time.Minute
	quickFleetOutage  = 5 * time.Second
)

// Part is the `multicluster` benchmark.
func Part() bench.Part {
	o := &settings{samples: 50, nodes: 9, lease: 10 * time.Second, clusters: 3,
		changeEvery: 200 * time.Millisecond, seed: 1}
	return bench.Part{
		Name:  "multicluster",
		Title: "Multi-cluster services: propagation and lost-cluster withdrawal on a local ClusterSet",
		Flags: func(fs *pflag.FlagSet) {
			fs.IntSliceVar(&o.services, "multicluster-services", nil,
				fmt.Sprintf("multicluster part: exported Services per member, one ClusterSet per value (default %v, %v with --quick)", fullServices, quickServices))
			fs.IntVar(&o.samples, "multicluster-samples", o.samples, "multicluster part: Services given one more Pod in the first member (at most the Services; fewer with --quick)")
			fs.IntVar(&o.nodes, "multicluster-nodes", o.nodes, "multicluster part: simulated Nodes per member")
			fs.IntVar(&o.clusters, "multicluster-clusters", o.clusters, "multicluster part: member clusters")
			fs.DurationVar(&o.lease, "multicluster-lease-duration", o.lease, "multicluster part: members' --cluster-lease-duration")
			fs.BoolVar(&o.headless, "multicluster-headless", false, "multicluster part: export headless Services instead of ClusterSetIP ones")
			fs.DurationVar(&o.changeEvery, "multicluster-change-interval", o.changeEvery, "multicluster part: pause between two scale-ups")
			fs.IntSliceVar(&o.fleetMembers, "multicluster-fleet-members", nil,
				fmt.Sprintf("multicluster part: members of each light ClusterSet (etcd and kube-apiserver only; default %v, %v with --quick)", fullFleet, quickFleet))
			fs.IntVar(&o.fleetServices, "multicluster-fleet-services", 0,
				fmt.Sprintf("multicluster part: exported Services per light member (default %d, %d with --quick)", fullFleetServices, quickFleetServices))
			fs.DurationVar(&o.fleetLease, "multicluster-fleet-lease-duration", 0, "multicluster part: light members' --cluster-lease-duration (default the manager's, 4s with --quick)")
			fs.BoolVar(&o.fleetOnly, "multicluster-fleet-only", false, "multicluster part: run only the light ClusterSets")
			fs.IntVar(&o.fleetChanges, "multicluster-fleet-changes", 0,
				fmt.Sprintf("multicluster part: endpoint changes made across the light members while the broker is down (default %d, %d with --quick)", fullFleetChanges, quickFleetChanges))
			fs.DurationVar(&o.fleetOutage, "multicluster-fleet-outage", 0,
				fmt.Sprintf("multicluster part: how long the light set's broker is down (default %s, %s with --quick)", fullFleetOutage, quickFleetOutage))
			fs.StringVar(&o.fleetProfile, "multicluster-fleet-profile-dir", "", "multicluster part: write CPU profiles of the light set's API servers and managers, the requests each API server served, through the bulk start, the join and their write floors, and the managers' logs, there (go tool pprof reads the profiles)")
			fs.StringVar(&o.fleetLogs, "multicluster-fleet-logs-dir", "", "multicluster part: keep the light set's logs (managers, API servers) there, one folder per size (removed with the set otherwise; --multicluster-fleet-profile-dir keeps them too)")
			fs.StringSliceVar(&o.managerArgs, "multicluster-manager-args", nil, "multicluster part: extra flags for every light member's manager (tuned runs; the headline runs use none)")
			fs.DurationVar(&o.timeout, "multicluster-timeout", 0, "multicluster part: how long each phase may take "+bench.PhaseTimeoutHelp)
		},
		Run: o.run,
	}
}

func (o *settings) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	services, samples, nodes, lease := o.services, o.samples, o.nodes, o.lease
	if len(services) == 0 {
		services = fullServices
		if env.Quick {
			services, samples, nodes, lease = quickServices, min(samples, 5), min(nodes, 3), min(lease, quickLease)
		}
	}
	if o.clusters < 2 {
		return nil, fmt.Errorf("multicluster needs at least 2 member clusters, have %d", o.clusters)
	}
	if _, err := env.Binary("manager"); err != nil {
		return nil, err
	}
	fleetMembers, fleetServices := o.fleetMembers, o.fleetServices
	if len(fleetMembers) == 0 {
		fleetMembers = map[bool][]int{false: fullFleet, true: quickFleet}[env.Quick]
	}
	if fleetServices == 0 {
		fleetServices = map[bool]int{false: fullFleetServices, true: quickFleetServices}[env.Quick]
	}
	changes, outage := o.fleetChanges, o.fleetOutage
	if changes == 0 {
		changes = map[bool]int{false: fullFleetChanges, true: quickFleetChanges}[env.Quick]
	}
	if outage == 0 {
		outage = map[bool]time.Duration{false: fullFleetOutage, true: quickFleetOutage}[env.Quick]
	}
	if o.fleetOnly {
		services = nil
	}
	var runs []run
	for _, n := range services {
		if n < 1 {
			return nil, fmt.Errorf("multicluster Services must be positive, got %d", n)
		}
		workdir, err := os.MkdirTemp("", "fleetslice-bench-mcs-")
		if err != nil {
			return nil, err
		}
		env.Logf("multicluster: %d clusters x %d exported Services", o.clusters, n)
		res, err := e2ebench.MeasureMCS(ctx, e2ebench.MCSMeasurement{
			MCSOptions: e2ebench.MCSOptions{
				Services: n, Samples: min(samples, n), Headless: o.headless,
				ChangeInterval: o.changeEvery, Seed: o.seed, Timeout: env.PhaseTimeout(o.timeout), Log: env.Log,
			},
			Clusters: o.clusters, Nodes: nodes, Lease: lease, BinDir: env.BinDir, Workdir: workdir,
		})
		os.RemoveAll(workdir)
		if err != nil {
			return nil, fmt.Errorf("%d Services: %w", n, err)
		}
		runs = append(runs, run{services: n, samples: min(samples, n), result: res})
	}
	var fleets []*fleetResult
	manager, _ := env.Binary("manager")
	// Light members run at the manager's default lease (30 s) unless told otherwise: ten members
	// and their API servers on a small machine delay renewals by seconds, and a short lease then
	// judges live members lost. Quick runs keep a short one, to wait less for the lost member.
	fleetLease := o.fleetLease
	if fleetLease == 0 && env.Quick {
		fleetLease = quickLease
	}
	for _, members := range fleetMembers {
		env.Logf("multicluster: %d light members x %d exported Services", members, fleetServices)
		res, err := measureFleet(ctx, fleetOptions{
			members: members, services: fleetServices, samples: min(samples, fleetServices), joinSamples: min(25, fleetServices),
			lease: fleetLease, changeEvery: o.changeEvery, restartQuiet: 15 * time.Second, timeout: env.PhaseTimeout(o.timeout),
			changes: changes, outage: outage, profileDir: o.fleetProfile, logsDir: o.fleetLogs,
			managerArgs: o.managerArgs, manager: manager, log: env.Log, seed: o.seed,
		})
		if err != nil {
			return nil, fmt.Errorf("%d light members: %w", members, err)
		}
		fleets = append(fleets, res)
	}
	return o.report(nodes, lease, runs, fleets), nil
}

type run struct {
	services, samples int
	result            *e2ebench.MCSResult
}

func (o *settings) report(nodes int, lease time.Duration, runs []run, fleets []*fleetResult) *bench.Report {
	kind := "ClusterSetIP"
	if o.headless {
		kind = "Headless"
	}
	r := &bench.Report{
		Intro: fmt.Sprintf("For each size a fresh local ClusterSet: a broker and %d members (kwok Nodes, real API "+
			"servers), %d simulated Nodes per member, one fleetslice manager process per member (lease %s, renewed "+
			"every third of it). Every member exports the same %s Services, each backed by one Pod, so "+
			"every member imports every member's endpoints. Once all imports are complete, sampled Services get one more "+
			"Pod in the first member, %s apart, and the new Pod's address is timed until it is listed ready "+
			"in each other member's imported EndpointSlices (seen by a watch). Then the last member's manager is "+
			"stopped and the others are timed until they hold none of its imported slices.",
			o.clusters, nodes, lease, kind, o.changeEvery),
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	prop := bench.Table{
		Caption: "Propagation: new ready endpoint in the first member -> listed ready in every other member",
		Header: []string{"Exported Services", "Pairs", "Missing", "All imports complete after",
			"p50 from watch", "p99 from watch", "max from watch", "p50 from condition", "p99 from condition", "max from condition"},
	}
	withdraw := bench.Table{
		Caption: "Lost cluster: its manager stopped; time until each other member holds none of its imported slices",
		Header:  []string{"Exported Services", "Member", "Imported slices of the lost cluster", "Lease expiry -> first withdrawn", "Lease expiry -> all withdrawn", "Manager stopped -> all withdrawn"},
	}
	for _, run := range runs {
		p := run.result.Propagation
		prop.Rows = append(prop.Rows, []string{
			bench.Count(int64(run.services)), strconv.Itoa(len(p.FromWatch)), strconv.Itoa(p.Missing),
			p.Settled.Round(100 * time.Millisecond).String(),
			ms(e2ebench.Percentile(p.FromWatch, 50)), ms(e2ebench.Percentile(p.FromWatch, 99)), ms(e2ebench.Percentile(p.FromWatch, 100)),
			ms(e2ebench.Percentile(p.FromCondition, 50)), ms(e2ebench.Percentile(p.FromCondition, 99)), ms(e2ebench.Percentile(p.FromCondition, 100)),
		})
		for _, w := range run.result.Withdrawals {
			withdraw.Rows = append(withdraw.Rows, []string{
				bench.Count(int64(run.services)), w.Member + " (lost: " + run.result.Lost + ")", strconv.Itoa(w.SlicesBefore),
				ms(w.FirstAfterExpiry), ms(w.AfterExpiry), ms(w.AfterStop),
			})
		}
		r.Checks = append(r.Checks, checks(run)...)
	}
	if len(runs) > 0 {
		r.Tables = []bench.Table{prop, withdraw}
		r.Notes = []string{
			"\"From watch\" starts when our own watch in the first member saw the Pod Ready: a lower bound. \"From " +
				"condition\" starts at the Pod's Ready lastTransitionTime, which the API keeps in whole seconds: an upper " +
				"bound, up to a second above the truth. A pair is (sampled Service, other member).",
			"A member notices a lost peer at its own first renewal after the peer's Lease expired, so detection " +
				"takes up to one renew interval; the rest is deleting the imported slices.",
		}
	}
	if len(fleets) > 0 {
		fleetTabs, fleetChecks := fleetTables(fleets)
		r.Tables = append(r.Tables, fleetTabs...)
		r.Checks = append(r.Checks, fleetChecks...)
		r.Notes = append(r.Notes, fleetNote(fleets[0].Lease, o.managerArgs), comebackNote(fleets[0]))
	}
	r.Notes = append(r.Notes, "No other multi-cluster services implementation runs beside fleetslice here; these figures stand on their own.")
	return r
}

// checks are the invariants of one size: every sampled change arrived everywhere, and the lost
// cluster's endpoints went away everywhere, none before its Lease had expired.
func checks(run run) []bench.Check {
	p := run.result.Propagation
	arrived := bench.Check{Name: fmt.Sprintf("%d Services: every sampled new endpoint reached every other member", run.services)}
	if p.Missing > 0 || len(p.FromWatch) == 0 {
		arrived.Failure = fmt.Sprintf("%d pairs arrived, %d missing", len(p.FromWatch), p.Missing)
	}
	withdrawn := bench.Check{Name: fmt.Sprintf("%d Services: the lost cluster's slices left every other member, none before its Lease expired", run.services)}
	for _, w := range run.result.Withdrawals {
		switch {
		case w.SlicesBefore == 0:
			withdrawn.Failure = fmt.Sprintf("%s imported no slice of the lost cluster before it was lost", w.Member)
		case w.FirstAfterExpiry < 0:
			withdrawn.Failure = fmt.Sprintf("%s withdrew a slice %s before the Lease expired", w.Member, -w.FirstAfterExpiry)
		}
	}
	return []bench.Check{arrived, withdrawn}
}
