package mcsbench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/lightset"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// fleetResult is what one fleet measurement saw.
type fleetResult struct {
	Members, Services int
	// Lease is the members' lease duration.
	Lease time.Duration
	// Bulk is from starting every manager at once to every member importing every Service from
	// every member; BulkWrites are the writes each API server (broker first) served until the
	// set was quiet again.
	Bulk       time.Duration
	BulkWrites []apimetrics.Writes
	// OthersEvents are, per cluster in the same order, the Event writes in BulkWrites that the
	// API server's own controllers made, not fleetslice.
	OthersEvents []int
	// BulkFloor and JoinFloor are the API servers' write floors of the bulk start and of a
	// member joining: the time plain clients without a rate limit take to write the same
	// objects (floor.go).
	BulkFloor, JoinFloor time.Duration
	// BulkCPU and BulkFloorCPU are what every API server and etcd used during the bulk start
	// and during its floor.
	BulkCPU, BulkFloorCPU time.Duration
	// JoinCPU and JoinFloorCPU are the same for the join and its floor; JoinManagersCPU is what
	// every manager used during the join.
	JoinCPU, JoinFloorCPU, JoinManagersCPU time.Duration
	// APIServerRestart is the first member's kube-apiserver stopped and started again while no
	// manager ran, until it served: part of the member restart's floor.
	APIServerRestart time.Duration
	// BrokerRestart is the same for the broker's kube-apiserver: part of its comeback's floor.
	BrokerRestart time.Duration
	// BrokerComeback is the broker's kube-apiserver coming back after an outage with changes
	// made meanwhile; MemberRestart the first member's restarting with nothing changed.
	BrokerComeback, MemberRestart comeback
	// Outage is how long the broker was to be down.
	Outage time.Duration
	// RestartWrites are the writes other than Lease renewals after every manager restarted with
	// nothing changed; RestartLeaseWrites the renewals meanwhile.
	RestartWrites      []apimetrics.Writes
	RestartLeaseWrites int
	// Propagation times a single endpoint change in the first member until each other member
	// lists it; WatchEventsPerChange and WatchBytesPerChange are what the broker sent its
	// watchers per such change.
	Propagation                               []time.Duration
	Missing                                   int
	WatchEventsPerChange, WatchBytesPerChange float64
	// Withdrawal is, per other member, from the lost member's Lease expiry to none of its
	// imported slices left.
	Withdrawal []time.Duration
	// Join is from the last member's manager starting (its state removed) until every member
	// imports everything again; JoinPropagation times single changes made meanwhile between two
	// other members.
	Join            time.Duration
	JoinPropagation []time.Duration
	JoinMissing     int
	// BrokerObjects counts the broker namespace's records, slice copies and Leases.
	BrokerObjects map[string]int
	// Broker API server and etcd resident memory after the bulk start, and CPU used during it.
	BrokerAPIServerRSS, BrokerEtcdRSS int64
	BrokerAPIServerCPU, BrokerEtcdCPU time.Duration
	// ManagerRSS is each member's manager's resident memory after the bulk start.
	ManagerRSS []int64
	// CPU used during the bulk start by all managers, all members' API servers and etcds: on a
	// small machine running everything, it tells which part the time went to.
	ManagersCPU, MemberAPIServersCPU, MemberEtcdsCPU time.Duration
	Wall                                             time.Duration
}

// floors measures, before any manager runs, the write floors of the bulk start, of the last
// member joining and of the broker's comeback changes, and the time an API server restart takes.
func (f *fleet) floors(ctx context.Context) error {
	var err error
	if f.res.BulkFloor, f.res.BulkFloorCPU, err = f.measureFloor(ctx, "floor-bulk", bulkFloor(f.o.members)); err != nil {
		return err
	}
	if f.res.JoinFloor, f.res.JoinFloorCPU, err = f.measureFloor(ctx, "floor-join", joinFloor(f.o.members, f.o.members-1)); err != nil {
		return err
	}
	changes, err := f.comebackChanges(f.o.changes)
	if err != nil {
		return err
	}
	if f.res.BrokerComeback.Floor, err = f.measureChangeFloor(ctx, "floor-comeback", changes); err != nil {
		return err
	}
	restart, own, err := f.timeAPIServerRestart(ctx, lightset.BrokerName, 0)
	if err != nil {
		return err
	}
	f.res.BrokerRestart, f.res.BrokerComeback.OwnStart = restart, own
	f.res.BrokerComeback.Floor += restart
	f.res.APIServerRestart, f.res.MemberRestart.OwnStart, err = f.timeAPIServerRestart(ctx, f.set.IDs[0], 1)
	return err
}

// clusters are the broker and the members, in the order of the write snapshots.
func (f *fleet) clusters() []*testenv.Cluster {
	return append([]*testenv.Cluster{f.set.Broker}, f.set.Members...)
}

func (f *fleet) bulkStart(ctx context.Context) error {
	before, err := f.snapshot(ctx)
	if err != nil {
		return err
	}
	apiserver, etcd, err := lightset.ControlPlanePIDs(f.set.Broker.Config.Host)
	if err != nil {
		return err
	}
	cpuAPI, cpuEtcd := localset.CPUTime(apiserver), localset.CPUTime(etcd)
	var memberAPIServers, memberEtcds []int
	for _, m := range f.set.Members {
		a, e, err := lightset.ControlPlanePIDs(m.Config.Host)
		if err != nil {
			return err
		}
		memberAPIServers, memberEtcds = append(memberAPIServers, a), append(memberEtcds, e)
	}
	apiBefore, etcdBefore := totalCPU(memberAPIServers), totalCPU(memberEtcds)
	planesBefore, err := f.controlPlanesCPU()
	if err != nil {
		return err
	}
	benchBefore := localset.CPUTime(os.Getpid())
	busy := sampleBusy(ctx)
	began := time.Now()
	if err := f.set.StartManagers(); err != nil {
		return err
	}
	profile, err := f.startProfile(ctx, "bulk", 30, "")
	if err != nil {
		return err
	}
	if err := f.waitComplete(ctx, f.set.IDs); err != nil {
		return err
	}
	f.res.Bulk = time.Since(began)
	f.logf("bulk start: the machine's CPUs were busy %s", busy.finish())
	if err := profile.finish(ctx); err != nil {
		return err
	}
	if f.res.BulkCPU, err = f.controlPlanesCPU(); err != nil {
		return err
	}
	f.res.BulkCPU -= planesBefore
	f.logf("every member imports everything %s after the managers started; API servers and etcds used %s of CPU (%s during the floor), the bench itself %s",
		f.res.Bulk.Round(time.Millisecond), f.res.BulkCPU.Round(100*time.Millisecond), f.res.BulkFloorCPU.Round(100*time.Millisecond),
		(localset.CPUTime(os.Getpid()) - benchBefore).Round(100*time.Millisecond))
	if f.res.BulkWrites, err = f.settle(ctx, before, 3*time.Second); err != nil {
		return err
	}
	if f.res.OthersEvents, err = f.othersEventWrites(ctx, began); err != nil {
		return err
	}
	f.res.BrokerAPIServerCPU, f.res.BrokerEtcdCPU = localset.CPUTime(apiserver)-cpuAPI, localset.CPUTime(etcd)-cpuEtcd
	f.res.BrokerAPIServerRSS, f.res.BrokerEtcdRSS = localset.ResidentBytes(apiserver), localset.ResidentBytes(etcd)
	f.res.MemberAPIServersCPU, f.res.MemberEtcdsCPU = totalCPU(memberAPIServers)-apiBefore, totalCPU(memberEtcds)-etcdBefore
	pids := f.set.ManagerPIDs()
	for _, id := range f.set.IDs {
		f.res.ManagerRSS = append(f.res.ManagerRSS, localset.ResidentBytes(pids[id]))
		f.res.ManagersCPU += localset.CPUTime(pids[id])
	}
	f.res.BrokerObjects = map[string]int{}
	for kind, list := range map[string]client.ObjectList{
		"ServiceExportRecord": &v1alpha1.ServiceExportRecordList{}, "EndpointSlice": &discoveryv1.EndpointSliceList{}, "Lease": &coordinationv1.LeaseList{},
	} {
		if err := f.set.Broker.Client.List(ctx, list, client.InNamespace(multicluster.DefaultNamespace)); err != nil {
			return err
		}
		f.res.BrokerObjects[kind] = meta.LenList(list)
	}
	return nil
}

// restart stops every manager and starts them again with nothing changed: what an upgrade does.
func (f *fleet) restart(ctx context.Context) error {
	for _, id := range f.set.IDs {
		if err := f.set.StopManager(id); err != nil {
			return err
		}
	}
	before, err := f.snapshot(ctx)
	if err != nil {
		return err
	}
	started := time.Now()
	if err := f.set.StartManagers(); err != nil {
		return err
	}
	for _, id := range f.set.IDs {
		if err := f.waitRenewed(ctx, id, started); err != nil {
			return err
		}
	}
	if err := sleep(ctx, f.o.restartQuiet); err != nil {
		return err
	}
	writes, err := f.since(ctx, before)
	if err != nil {
		return err
	}
	for _, w := range writes {
		f.res.RestartWrites = append(f.res.RestartWrites, withoutLeases(w))
		f.res.RestartLeaseWrites += w.Total() - withoutLeases(w).Total()
	}
	f.logf("restart with nothing changed: %d writes besides %d Lease renewals", nonLeaseTotal(f.res.RestartWrites), f.res.RestartLeaseWrites)
	return nil
}

// waitRenewed waits until a member's Lease was renewed after since: its new manager runs.
func (f *fleet) waitRenewed(ctx context.Context, id string, since time.Time) error {
	since = since.Truncate(time.Second)
	key := client.ObjectKey{Namespace: multicluster.DefaultNamespace, Name: liveness.LeaseName(id)}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, f.o.timeout, true, func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := f.set.Broker.Client.Get(ctx, key, lease); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return lease.Spec.RenewTime != nil && !lease.Spec.RenewTime.Time.Before(since), nil
	})
}

// change adds a second ready endpoint to a Service's slice in member m and returns its address.
func (f *fleet) change(ctx context.Context, m, i int) (string, time.Time, error) {
	address := memberAddress(m, i, 1)
	slice := fleetSlice(fleetService(i), memberAddress(m, i, 0), address)
	current := &discoveryv1.EndpointSlice{}
	if err := f.set.Members[m].Client.Get(ctx, client.ObjectKeyFromObject(slice), current); err != nil {
		return "", time.Time{}, err
	}
	current.Endpoints = slice.Endpoints
	at := time.Now()
	return address, at, f.set.Members[m].Client.Update(ctx, current)
}

// timeChanges makes a single change in member from per sampled Service, changeEvery apart, and
// times each address's arrival in the members to.
func (f *fleet) timeChanges(ctx context.Context, from int, to []int, sample []int) (times []time.Duration, missing int, err error) {
	type made struct {
		service, address string
		at               time.Time
	}
	var changes []made
	for _, i := range sample {
		address, at, err := f.change(ctx, from, i)
		if err != nil {
			return nil, 0, err
		}
		changes = append(changes, made{fleetService(i), address, at})
		if err := sleep(ctx, f.o.changeEvery); err != nil {
			return nil, 0, err
		}
	}
	source := f.set.IDs[from]
	arrived := func() (out []time.Duration, missing int) {
		for _, c := range changes {
			for _, m := range to {
				if at, ok := f.views[m].arrived(c.service, source, c.address); ok {
					out = append(out, at.Sub(c.at))
				} else {
					missing++
				}
			}
		}
		return out, missing
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		times, missing = arrived()
		return missing == 0, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return nil, 0, err
	}
	return times, missing, nil
}

func (f *fleet) others(except ...int) []int {
	var out []int
	for m := range f.set.Members {
		skip := false
		for _, e := range except {
			skip = skip || m == e
		}
		if !skip {
			out = append(out, m)
		}
	}
	return out
}

func (f *fleet) propagate(ctx context.Context) error {
	before, err := apimetrics.Scrape(ctx, f.set.Broker.Config)
	if err != nil {
		return err
	}
	sample := f.sampleServices(f.o.samples, 1)
	f.res.Propagation, f.res.Missing, err = f.timeChanges(ctx, 0, f.others(0), sample)
	if err != nil {
		return err
	}
	after, err := apimetrics.Scrape(ctx, f.set.Broker.Config)
	if err != nil {
		return err
	}
	events0, bytes0, err := apimetrics.WatchEvents(before, nil)
	if err != nil {
		return err
	}
	events1, bytes1, err := apimetrics.WatchEvents(after, nil)
	if err != nil {
		return err
	}
	// Lease renewals are watched too; they are part of what a member receives, so they stay in.
	f.res.WatchEventsPerChange = float64(events1-events0) / float64(len(sample))
	f.res.WatchBytesPerChange = float64(bytes1-bytes0) / float64(len(sample))
	f.logf("%d single changes timed, %d arrivals missing", len(sample), f.res.Missing)
	return nil
}

// loseMember stops the last member's manager and times, in every other member, the withdrawal
// of its imported slices after its Lease expired.
func (f *fleet) loseMember(ctx context.Context) error {
	lost := len(f.set.Members) - 1
	id := f.set.IDs[lost]
	if err := f.set.StopManager(id); err != nil {
		return err
	}
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: multicluster.DefaultNamespace, Name: liveness.LeaseName(id)}
	if err := f.set.Broker.Client.Get(ctx, key, lease); err != nil {
		return err
	}
	expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	pending := map[int]bool{}
	for _, m := range f.others(lost) {
		pending[m] = true
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, f.o.timeout, true, func(context.Context) (bool, error) {
		for m := range pending {
			if f.views[m].slicesFrom(id) == 0 {
				f.res.Withdrawal = append(f.res.Withdrawal, time.Since(expiry))
				delete(pending, m)
			}
		}
		return len(pending) == 0, nil
	})
}

// join removes the lost member from the ClusterSet for good (its broker objects and its own
// imports), then starts its manager again: a member joining a running set. Meanwhile single
// changes between the first two members are timed.
func (f *fleet) join(ctx context.Context) error {
	last := len(f.set.Members) - 1
	id, member := f.set.IDs[last], f.set.Members[last]
	if err := multicluster.Leave(ctx, f.set.Broker.Client, multicluster.DefaultNamespace, id); err != nil {
		return err
	}
	inNamespace := client.InNamespace(fleetNamespace)
	if err := member.Client.DeleteAllOf(ctx, &mcsv1beta1.ServiceImport{}, inNamespace); err != nil {
		return err
	}
	if err := member.Client.DeleteAllOf(ctx, &discoveryv1.EndpointSlice{}, inNamespace, client.HasLabels{mcsv1beta1.LabelSourceCluster}); err != nil {
		return err
	}
	// Services cannot be deleted as a collection; the derived ones carry the import's name label.
	services := &corev1.ServiceList{}
	if err := member.Client.List(ctx, services, inNamespace, client.HasLabels{mcsv1beta1.LabelServiceName}); err != nil {
		return err
	}
	for i := range services.Items {
		if err := client.IgnoreNotFound(member.Client.Delete(ctx, &services.Items[i])); err != nil {
			return err
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, f.o.timeout, true, func(context.Context) (bool, error) {
		return f.views[last].empty(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s's imports to be gone: %w", id, err)
	}
	planesBefore, err := f.controlPlanesCPU()
	if err != nil {
		return err
	}
	managersBefore, benchBefore := f.managersCPU(), localset.CPUTime(os.Getpid())
	busy := sampleBusy(ctx)
	began := time.Now()
	if err := f.set.StartManagers(id); err != nil {
		return err
	}
	profile, err := f.startProfile(ctx, "join", 15, "")
	if err != nil {
		return err
	}
	sample := f.sampleServices(f.o.joinSamples, 2)
	f.res.JoinPropagation, f.res.JoinMissing, err = f.timeChanges(ctx, 1, []int{0}, sample)
	if err != nil {
		return err
	}
	if err := f.waitComplete(ctx, f.set.IDs); err != nil {
		return err
	}
	f.res.Join = time.Since(began)
	f.logf("join: the machine's CPUs were busy %s", busy.finish())
	if err := profile.finish(ctx); err != nil {
		return err
	}
	planes, err := f.controlPlanesCPU()
	if err != nil {
		return err
	}
	f.res.JoinCPU, f.res.JoinManagersCPU = planes-planesBefore, f.managersCPU()-managersBefore
	f.logf("%s joined: every member imports everything %s after its manager started; API servers and etcds used %s of CPU (%s during the floor), the managers %s, the bench itself %s",
		id, f.res.Join.Round(time.Millisecond), f.res.JoinCPU.Round(100*time.Millisecond), f.res.JoinFloorCPU.Round(100*time.Millisecond),
		f.res.JoinManagersCPU.Round(100*time.Millisecond), (localset.CPUTime(os.Getpid()) - benchBefore).Round(100*time.Millisecond))
	return nil
}

func totalCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		sum += localset.CPUTime(pid)
	}
	return sum
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// managersCPU is the CPU the running managers have used so far.
func (f *fleet) managersCPU() time.Duration {
	return totalCPU(slices.Collect(maps.Values(f.set.ManagerPIDs())))
}

// controlPlanesCPU is the CPU every API server and etcd of the set (broker and members) has used
// so far. Read before and after a phase, it says how much control-plane work the phase cost, which
// sets a bulk start beside its write floor: the same writes, and what the managers' reads and
// watches added to them.
func (f *fleet) controlPlanesCPU() (time.Duration, error) {
	var sum time.Duration
	for _, c := range f.clusters() {
		apiserver, etcd, err := lightset.ControlPlanePIDs(c.Config.Host)
		if err != nil {
			return 0, err
		}
		sum += localset.CPUTime(apiserver) + localset.CPUTime(etcd)
	}
	return sum, nil
}
