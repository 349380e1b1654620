package mcsbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
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
// member), by plain clients without a rate limit as measureFloor writes.
func (f *fleet) measureChangeFloor(ctx context.Context, namespace string, changes []fleetChange) (time.Duration, error) {
	clients, err := f.floorClients(ctx, namespace)
	if err != nil {
		return 0, err
	}
	in, err := f.readFloorInputs(ctx)
	if err != nil {
		return 0, err
	}
	updates, err := f.changeFloorJobs(ctx, clients, namespace, in, changes)
	if err != nil {
		return 0, err
	}
	took, err := runAll(ctx, clients, updates)
	if err != nil {
		return 0, fmt.Errorf("updating the floor's slices: %w", err)
	}
	f.logf("write floor in %s (%d changes): %s", namespace, len(changes), took.Round(time.Millisecond))
	return took, cleanFloor(ctx, clients, namespace)
}

// changeFloorJobs creates in namespace, untimed, the objects changes update as fleetslice's
// builders make them from in (the workload before the changes): each changed Service's broker
// copy, and in every member its slice imported from the changed exporter, owned by a
// ServiceImport. It returns the updates the changes make of them, as the builders make them
// from the changed workload: one per change and API server, the broker first.
func (f *fleet) changeFloorJobs(ctx context.Context, clients []client.Client, namespace string, in floorInputs, changes []fleetChange) ([][]floorJob, error) {
	changed := in.withChanges(changes)
	creates, updates := make([][]floorJob, len(clients)), make([][]floorJob, len(clients))
	for _, c := range changes {
		before, after := f.floorCopies(namespace, in, c.member, c.service), f.floorCopies(namespace, changed, c.member, c.service)
		if len(before) != 1 || len(after) != 1 {
			return nil, fmt.Errorf("%s %s: %d broker copies before the change and %d after, want one", f.set.IDs[c.member], fleetService(c.service), len(before), len(after))
		}
		creates[0] = append(creates[0], createJob(before[0]))
		updates[0] = append(updates[0], updateJob(before[0], after[0]))
		for m := range f.set.Members {
			before, after, err := f.importedChange(namespace, in, changed, m, c)
			if err != nil {
				return nil, err
			}
			creates[m+1] = append(creates[m+1], createJob(before))
			updates[m+1] = append(updates[m+1], updateJob(before, after))
		}
	}
	if _, err := runAll(ctx, clients, creates); err != nil {
		return nil, fmt.Errorf("creating the slices the floor updates: %w", err)
	}
	return updates, nil
}

// importedChange is member m's slice imported from c's exporter, as its import sync creates it
// from in, and the update of it its sync makes once the exporter's slice is as in changed.
func (f *fleet) importedChange(namespace string, in, changed floorInputs, m int, c fleetChange) (before, after *discoveryv1.EndpointSlice, err error) {
	exporters := allMembers(len(f.set.Members))
	plan := f.importPlan(namespace, in, m, c.service, exporters, nil)
	si := plan.CreateImport.DeepCopy()
	si.UID = types.UID(fmt.Sprintf("floor-%s-%d", f.set.IDs[m], c.service))
	from := f.set.IDs[c.member]
	for _, s := range plan.Slices.Create {
		if s.Labels[mcsv1beta1.LabelSourceCluster] == from {
			before = s
		}
	}
	if before == nil {
		return nil, nil, fmt.Errorf("%s imports no slice of %s from %s", f.set.IDs[m], fleetService(c.service), from)
	}
	importplan.BindOwner(before, si)
	again := f.importPlan(namespace, changed, m, c.service, exporters, &floorImport{si: si, imported: []discoveryv1.EndpointSlice{*before}})
	for _, s := range again.Slices.Update {
		if s.Name == before.Name {
			after = s
		}
	}
	if after == nil || len(again.Slices.Delete) > 0 {
		return nil, nil, fmt.Errorf("%s's import of %s takes the change from %s as %d updates, %d deletes, not one update",
			f.set.IDs[m], fleetService(c.service), from, len(again.Slices.Update), len(again.Slices.Delete))
	}
	importplan.BindOwner(after, si)
	return before, after, nil
}

// withChanges is in with every changed Service's source slice holding changedSlice's endpoints.
func (in floorInputs) withChanges(changes []fleetChange) floorInputs {
	out := floorInputs{records: in.records, sources: make([][]*discoveryv1.EndpointSlice, len(in.sources))}
	for m := range in.sources {
		out.sources[m] = slices.Clone(in.sources[m])
	}
	for _, c := range changes {
		s := out.sources[c.member][c.service].DeepCopy()
		s.Endpoints = fleetSlice(fleetService(c.service), changedSlice(c)...).Endpoints
		out.sources[c.member][c.service] = s
	}
	return out
}

func createJob(obj client.Object) floorJob {
	return func(ctx context.Context, cl client.Client) error { return cl.Create(ctx, obj) }
}

// updateJob writes after over before, which a create job wrote.
func updateJob(before, after client.Object) floorJob {
	return func(ctx context.Context, cl client.Client) error {
		after.SetResourceVersion(before.GetResourceVersion())
		return cl.Update(ctx, after)
	}
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
