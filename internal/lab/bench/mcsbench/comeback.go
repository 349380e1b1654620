package mcsbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
	"github.com/fleetslice/fleetslice/internal/lab/lightset"
)

// comeback is what one API server coming back made the set do.
type comeback struct {
	// Changes is how many endpoint changes were made while it was down (the broker) or after it
	// was back (a member's, a single one to see its manager caught up).
	Changes int
	// Down is from the API server's stop until it served again.
	Down time.Duration
	// Took is the time compared with Floor, to the last arrival the members' watches saw. The
	// broker: from starting it again until every member imported every change (managers write
	// to it before its readiness check passes, so timing from "serving" would leave their work
	// out, and that check may pass after the last arrival); its Floor is the same API server's
	// restart with no manager running plus the write floor of the changes. A member's: from its
	// stop until its manager was caught up (the change arrived in every member: its caches of
	// its own API server watch again); its Floor is the same API server's restart with no
	// manager running plus the p50 single change of the propagation phase. Its Lease lives in
	// the broker and is renewed through the restart; a lapse would withdraw its endpoints, which
	// the writes beyond the expected ones would show.
	Took, Floor time.Duration
	// Writes are the writes each API server served from before the stop until the set was quiet
	// again, broker first, Lease renewals aside; Expected those the changes require (see
	// expectedWrites); LeaseWrites the renewals meanwhile.
	Writes, Expected []apimetrics.Writes
	LeaseWrites      int
	// OwnStart are the writes besides Lease renewals the restarted API server made itself while
	// starting, measured in its restart before any manager ran; Expected includes them.
	OwnStart apimetrics.Writes
}

// comebackQuiet is how long the set must make no write other than a Lease renewal before a
// comeback's writes are counted: at least the restart's quiet time, and past a lease duration
// and a renewal, the grace a member's peers get after an outage before they may be judged lost.
func (f *fleet) comebackQuiet() time.Duration {
	return max(f.o.restartQuiet, f.res.Lease+f.res.Lease/3)
}

// comebackProfileSeconds is how much of the broker's comeback --multicluster-fleet-profile-dir
// profiles: the 10 x 1,000 comeback took 25 to 33 s.
const comebackProfileSeconds = 20

// brokerComeback stops the broker's kube-apiserver, makes the comeback changes in the members
// while it is down, starts it again once the outage has lasted its time, and times until every
// member imports every change.
func (f *fleet) brokerComeback(ctx context.Context) error {
	changes, err := f.comebackChanges(f.o.changes)
	if err != nil {
		return err
	}
	res := &f.res.BrokerComeback
	res.Changes, res.Expected = len(changes), withOwnStart(f.expectedWrites(changes), 0, res.OwnStart)
	// The join before may leave a few writes behind; they are not the comeback's.
	before, err := f.quietSnapshot(ctx, f.comebackQuiet())
	if err != nil {
		return err
	}
	stopped := time.Now()
	if err := f.set.StopAPIServer(lightset.BrokerName); err != nil {
		return err
	}
	if err := f.makeChanges(ctx, changes); err != nil {
		return fmt.Errorf("changing endpoints while the broker is down: %w", err)
	}
	if left := f.o.outage - time.Since(stopped); left > 0 {
		if err := sleep(ctx, left); err != nil {
			return err
		}
	}
	f.logf("broker down %s with %d changes made meanwhile; starting it again", time.Since(stopped).Round(time.Millisecond), len(changes))
	// The profile's scrapes of the members come before the clock starts, not inside the time.
	profile, err := f.startProfile(ctx, "broker-comeback", comebackProfileSeconds, lightset.BrokerName)
	if err != nil {
		return err
	}
	starting := time.Now()
	if err := f.set.StartAPIServer(ctx, lightset.BrokerName); err != nil {
		return err
	}
	back := time.Now()
	res.Down = back.Sub(stopped)
	if err := f.waitArrived(ctx, changes, f.others()); err != nil {
		return fmt.Errorf("waiting for the changes made while the broker was down: %w", err)
	}
	// The members' watches time each arrival; the broker's readiness check may pass after the
	// last one (its bootstrap hooks run slowly while the members write), and it is not what the
	// members wait for.
	res.Took = f.lastArrival(changes, f.others()).Sub(starting)
	f.logf("every member imports every change %s after the broker was started again; it served (readyz) after %s",
		res.Took.Round(time.Millisecond), back.Sub(starting).Round(time.Millisecond))
	if err := profile.finish(ctx); err != nil {
		return err
	}
	return f.countComeback(ctx, res, before, 0)
}

// memberRestart stops and starts the first member's kube-apiserver with nothing changed (its
// etcd keeps the data), makes one change in that member as soon as it serves again, and times
// until that member's manager is caught up.
func (f *fleet) memberRestart(ctx context.Context) error {
	const m = 0
	id := f.set.IDs[m]
	changes := []fleetChange{{member: m, service: f.o.services - 1}}
	res := &f.res.MemberRestart
	res.Changes, res.Expected = len(changes), withOwnStart(f.expectedWrites(changes), m+1, res.OwnStart)
	before, err := f.quietSnapshot(ctx, 3*time.Second)
	if err != nil {
		return err
	}
	stopped := time.Now()
	if err := f.set.StopAPIServer(id); err != nil {
		return err
	}
	if err := f.set.StartAPIServer(ctx, id); err != nil {
		return err
	}
	back := time.Now()
	res.Down = back.Sub(stopped)
	if err := f.makeChanges(ctx, changes); err != nil {
		return fmt.Errorf("changing an endpoint after %s's API server came back: %w", id, err)
	}
	if err := f.waitArrived(ctx, changes, f.others()); err != nil {
		return fmt.Errorf("waiting for the change made after %s's API server came back: %w", id, err)
	}
	res.Took = f.lastArrival(changes, f.others()).Sub(stopped)
	res.Floor = f.res.APIServerRestart + e2ebench.Percentile(f.res.Propagation, 50)
	f.logf("%s's API server back after %s, its manager caught up %s after the stop", id, res.Down.Round(time.Millisecond), res.Took.Round(time.Millisecond))
	return f.countComeback(ctx, res, before, m+1)
}

// makeChanges makes changes, each member's one after another, the members at once.
func (f *fleet) makeChanges(ctx context.Context, changes []fleetChange) error {
	errs := make([]error, len(f.set.Members))
	var wg sync.WaitGroup
	for m := range f.set.Members {
		wg.Go(func() {
			for _, c := range changes {
				if c.member == m && errs[m] == nil {
					errs[m] = f.changeSlice(ctx, c)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// changeSlice sets the bench's slice of a Service in a member to changedSlice's addresses.
func (f *fleet) changeSlice(ctx context.Context, c fleetChange) error {
	name := fleetService(c.service)
	want := fleetSlice(name, changedSlice(c)...)
	current := &discoveryv1.EndpointSlice{}
	member := f.set.Members[c.member]
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(want), current); err != nil {
		return fmt.Errorf("%s %s: %w", f.set.IDs[c.member], name, err)
	}
	current.Endpoints = want.Endpoints
	if err := member.Client.Update(ctx, current); err != nil {
		return fmt.Errorf("%s %s: %w", f.set.IDs[c.member], name, err)
	}
	return nil
}

// waitArrived waits until each change's new address is listed ready in the imports of every
// member in to.
func (f *fleet) waitArrived(ctx context.Context, changes []fleetChange, to []int) error {
	last := time.Now()
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, f.o.timeout, true, func(context.Context) (bool, error) {
		if err := f.set.ManagersRunning(); err != nil {
			return false, err
		}
		missing, _ := f.arrivals(changes, to)
		if missing > 0 && time.Since(last) > 5*time.Second {
			f.logf("%d of %d arrivals still missing", missing, len(changes)*len(to))
			last = time.Now()
		}
		return missing == 0, nil
	})
}

// arrivals is how many of changes are not yet listed ready in the imports of each member in to,
// and when the last of those that are was first listed there, as the members' watches saw it.
func (f *fleet) arrivals(changes []fleetChange, to []int) (missing int, last time.Time) {
	for _, c := range changes {
		address := memberAddress(c.member, c.service, comebackAddress)
		for _, m := range to {
			at, ok := f.views[m].arrived(fleetService(c.service), f.set.IDs[c.member], address)
			switch {
			case !ok:
				missing++
			case at.After(last):
				last = at
			}
		}
	}
	return missing, last
}

// lastArrival is when the last of changes was first listed ready in the imports of a member in
// to: once waitArrived has returned, every one arrived.
func (f *fleet) lastArrival(changes []fleetChange, to []int) time.Time {
	_, last := f.arrivals(changes, to)
	return last
}

// countComeback waits until the set is quiet and records the writes since before; restarted is
// the index (broker 0) of the API server that restarted meanwhile.
func (f *fleet) countComeback(ctx context.Context, res *comeback, before []apimetrics.Writes, restarted int) error {
	writes, err := f.settleWith(ctx, func(ctx context.Context) ([]apimetrics.Writes, error) {
		return f.sinceRestart(ctx, before, restarted)
	}, f.comebackQuiet())
	if err != nil {
		return fmt.Errorf("counting the writes: %w", err)
	}
	for _, w := range writes {
		res.Writes = append(res.Writes, withoutLeases(w))
		res.LeaseWrites += w.Total() - withoutLeases(w).Total()
	}
	f.logf("writes besides %d Lease renewals: %s; beyond what the changes require: %s", res.LeaseWrites,
		clusterWrites(f.set.IDs, res.Writes), clusterWrites(f.set.IDs, unexpected(res.Writes, res.Expected)))
	return nil
}

// sinceRestart is the writes each API server served since before, where the API server of index
// restarted in between: its counters began again at zero, so all it counted since its start is
// taken as is. What it served between the snapshot and its stop is not counted: the phases stop
// it right after the snapshot, on a quiet set.
func (f *fleet) sinceRestart(ctx context.Context, before []apimetrics.Writes, restarted int) ([]apimetrics.Writes, error) {
	now, err := f.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for i := range now {
		if i != restarted {
			now[i] = now[i].Sub(before[i])
		}
	}
	return now, nil
}

// quietSnapshot waits until no API server served a write other than a Lease renewal for quiet,
// then reads every API server's write counters.
func (f *fleet) quietSnapshot(ctx context.Context, quiet time.Duration) ([]apimetrics.Writes, error) {
	base, err := f.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := f.settle(ctx, base, quiet); err != nil {
		return nil, fmt.Errorf("waiting for a quiet set: %w", err)
	}
	return f.snapshot(ctx)
}
