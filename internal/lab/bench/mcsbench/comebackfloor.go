package mcsbench

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
)

// fleetChange is one endpoint change: a second ready endpoint in the bench's slice of one
// member's Service.
type fleetChange struct{ member, service int }

// comebackAddress is the address number (memberAddress's n) the comeback changes add. The single
// changes of the earlier phases add number 1, so every comeback change is a real change and its
// address is seen for the first time when it arrives.
const comebackAddress = 2

// comebackChanges spreads n changes over the members, Service after Service: change j is to
// member j%members's Service j/members. The last Service stays unchanged, for the single change
// of the member restart.
func (f *fleet) comebackChanges(n int) ([]fleetChange, error) {
	members := len(f.set.Members)
	if (n+members-1)/members > f.o.services-1 {
		return nil, fmt.Errorf("%d changes need %d Services per member besides the last, there are %d", n, (n+members-1)/members, f.o.services-1)
	}
	out := make([]fleetChange, n)
	for j := range out {
		out[j] = fleetChange{member: j % members, service: j / members}
	}
	return out, nil
}

// changedSlice is the bench's slice of a changed Service: its first address and the comeback's.
func changedSlice(c fleetChange) []string {
	return []string{memberAddress(c.member, c.service, 0), memberAddress(c.member, c.service, comebackAddress)}
}

// expectedWrites are the writes changes require once every member imports everything, per API
// server, broker first: the bench's own update of each changed slice in its member, and one
// update per change of its copy in the broker and of the imported slice in every member (each
// member imports its own exports too).
func (f *fleet) expectedWrites(changes []fleetChange) []apimetrics.Writes {
	update := apimetrics.Write{Resource: "endpointslices", Verb: "update"}
	out := make([]apimetrics.Writes, len(f.set.Members)+1)
	for i := range out {
		out[i] = apimetrics.Writes{Served: map[apimetrics.Write]int{update: len(changes)}, Conflicts: map[apimetrics.Write]int{}}
	}
	for _, c := range changes {
		out[c.member+1].Served[update]++
	}
	return out
}

// measureChangeFloor is the write floor of changes reaching a converged set: the slice updates
// expectedWrites names besides the bench's own (one per change in the broker and in every
// member), by plain clients without a rate limit as measureFloor writes. The slices they update
// are created first, untimed.
func (f *fleet) measureChangeFloor(ctx context.Context, namespace string, changes []fleetChange) (time.Duration, error) {
	clients, err := f.floorClients(ctx, namespace)
	if err != nil {
		return 0, err
	}
	creates, updates := make([][]floorJob, len(clients)), make([][]floorJob, len(clients))
	for i := range clients {
		for _, c := range changes {
			name := fleetService(c.service)
			s := fleetSlice(name, memberAddress(c.member, c.service, 0))
			s.Namespace, s.Name = namespace, f.set.IDs[c.member]+"."+name
			creates[i] = append(creates[i], func(ctx context.Context, cl client.Client) error { return cl.Create(ctx, s) })
			updates[i] = append(updates[i], func(ctx context.Context, cl client.Client) error {
				s.Endpoints = fleetSlice(name, changedSlice(c)...).Endpoints
				return cl.Update(ctx, s)
			})
		}
	}
	if _, err := runAll(ctx, clients, creates); err != nil {
		return 0, fmt.Errorf("creating the slices the floor updates: %w", err)
	}
	took, err := runAll(ctx, clients, updates)
	if err != nil {
		return 0, fmt.Errorf("updating the floor's slices: %w", err)
	}
	f.logf("write floor in %s (%d changes): %s", namespace, len(changes), took.Round(time.Millisecond))
	return took, cleanFloor(ctx, clients, namespace)
}

// timeAPIServerRestart stops and starts one cluster's kube-apiserver while no manager runs, and
// returns the time from the stop until it served again, what the restart costs by itself, and
// the writes other than Lease renewals the API server made itself while starting (index is the
// cluster's in the write snapshots).
func (f *fleet) timeAPIServerRestart(ctx context.Context, name string, index int) (time.Duration, apimetrics.Writes, error) {
	began := time.Now()
	if err := f.set.StopAPIServer(name); err != nil {
		return 0, apimetrics.Writes{}, err
	}
	if err := f.set.StartAPIServer(ctx, name); err != nil {
		return 0, apimetrics.Writes{}, err
	}
	took := time.Since(began)
	// A restarted API server's counters begin at zero: all they hold is its own.
	all, err := f.settleWith(ctx, f.snapshot, 5*time.Second)
	if err != nil {
		return 0, apimetrics.Writes{}, fmt.Errorf("counting the writes of %s's restarted API server: %w", name, err)
	}
	own := withoutLeases(all[index])
	f.logf("%s's kube-apiserver restarted in %s with no manager running; its own writes while starting, Lease renewals aside: %s",
		name, took.Round(time.Millisecond), writeList(own))
	return took, own, nil
}

// withOwnStart adds to expected[index] the writes the API server of that index makes itself
// when it starts.
func withOwnStart(expected []apimetrics.Writes, index int, own apimetrics.Writes) []apimetrics.Writes {
	for k, n := range own.Served {
		expected[index].Served[k] += n
	}
	return expected
}
