package mcsbench

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// The floor writes the objects fleetslice's own builders make from the workload, not
// hand-written likenesses: an API server's cost per write grows with what the object holds
// (labels, owner references, conditions), and a floor of slimmer objects is a lower floor.
// TestFloorObjectsAreTheObjectsOfAConvergedClusterSet holds the two to the same fields.

// floorInputs are what the floor's objects are made from: each member's workload as its API
// server holds it (defaults included), as the record it publishes and its source slice, by
// member and Service.
type floorInputs struct {
	records [][]merge.Record
	sources [][]*discoveryv1.EndpointSlice
}

// readFloorInputs reads every member's Services, exports and slices of the workload.
func (f *fleet) readFloorInputs(ctx context.Context) (floorInputs, error) {
	var in floorInputs
	for m, member := range f.set.Members {
		var services corev1.ServiceList
		var exports mcsv1beta1.ServiceExportList
		var sources discoveryv1.EndpointSliceList
		for _, list := range []client.ObjectList{&services, &exports, &sources} {
			if err := member.Client.List(ctx, list, client.InNamespace(fleetNamespace)); err != nil {
				return in, fmt.Errorf("%s: %w", f.set.IDs[m], err)
			}
		}
		serviceNamed, exportNamed, sliceNamed := byName(services.Items), byName(exports.Items), byName(sources.Items)
		records := make([]merge.Record, f.o.services)
		slicesOf := make([]*discoveryv1.EndpointSlice, f.o.services)
		for i := range f.o.services {
			name := fleetService(i)
			svc, export, slice := serviceNamed[name], exportNamed[name], sliceNamed[fleetSlice(name).Name]
			if svc == nil || export == nil || slice == nil {
				return in, fmt.Errorf("%s: the workload of %s is incomplete", f.set.IDs[m], name)
			}
			rec, err := merge.RecordFromService(f.set.IDs[m], export, svc)
			if err != nil {
				return in, fmt.Errorf("%s: %w", f.set.IDs[m], err)
			}
			records[i], slicesOf[i] = rec, slice
		}
		in.records, in.sources = append(in.records, records), append(in.sources, slicesOf)
	}
	return in, nil
}

// byName indexes a list's items by name.
func byName[T any, PT interface {
	*T
	GetName() string
}](items []T) map[string]PT {
	out := make(map[string]PT, len(items))
	for i := range items {
		out[PT(&items[i]).GetName()] = &items[i]
	}
	return out
}

// floorRecord is exporter m's broker record of Service i, as the export controller writes it.
func (f *fleet) floorRecord(namespace string, in floorInputs, m, i int) *v1alpha1.ServiceExportRecord {
	id, name := f.set.IDs[m], fleetService(i)
	return &v1alpha1.ServiceExportRecord{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      names.RecordName(id, fleetNamespace, name),
			Labels:    names.RecordLabels(id, fleetNamespace, name),
		},
		Spec: in.records[m][i],
	}
}

// floorCopies are exporter m's broker copies of Service i's slices.
func (f *fleet) floorCopies(namespace string, in floorInputs, m, i int) []*discoveryv1.EndpointSlice {
	return sliceplan.BrokerCopies(f.set.IDs[m], namespace, fleetNamespace, fleetService(i), in.sources[m][i:i+1])
}

// floorImport is one member's import of one Service as it stands: what a floor job wrote.
type floorImport struct {
	si       *mcsv1beta1.ServiceImport
	derived  *corev1.Service
	imported []discoveryv1.EndpointSlice
}

// importPlan is member m's import sync of Service i from exporters, starting from have (nil
// when the member has no import of it yet).
func (f *fleet) importPlan(namespace string, in floorInputs, m, i int, exporters []int, have *floorImport) importplan.Sync {
	input := importplan.Input{
		Key:  types.NamespacedName{Namespace: namespace, Name: fleetService(i)},
		Live: map[string]bool{}, Self: f.set.IDs[m],
	}
	for _, e := range exporters {
		id := f.set.IDs[e]
		input.Records = append(input.Records, in.records[e][i])
		input.Live[id] = true
		if e == m {
			input.Sources = append(input.Sources, sliceplan.LocalSources(id, in.sources[e][i:i+1])...)
			continue
		}
		for _, c := range f.floorCopies("", in, e, i) {
			input.Sources = append(input.Sources, sliceplan.SourcesFromBroker([]discoveryv1.EndpointSlice{*c}, []string{id})...)
		}
	}
	if have != nil {
		input.Import, input.Derived, input.Imported = have.si, have.derived, have.imported
	}
	return importplan.Plan(input)
}

// writeImport writes member m's import sync of Service i in namespace as the import controller
// does: the derived Service, the ServiceImport with its ClusterSetIPs, the imported slices
// owned by it, and its status. It returns the import as it then stands.
func (f *fleet) writeImport(ctx context.Context, c client.Client, namespace string, in floorInputs, m, i int, exporters []int, have *floorImport) (*floorImport, error) {
	sync := f.importPlan(namespace, in, m, i, exporters, have)
	if sync.Skip != "" || sync.Teardown != nil || sync.UpdateImport != nil || sync.Derived.Update != nil || sync.Derived.Delete != nil {
		return nil, fmt.Errorf("%s/%s: the floor writes new imports and new exporters only, the plan says %+v", namespace, fleetService(i), sync)
	}
	out := &floorImport{}
	if have != nil {
		*out = *have
	}
	if len(sync.Derived.Create) > 0 {
		out.derived = sync.Derived.Create[0]
		if err := c.Create(ctx, out.derived); err != nil {
			return nil, err
		}
	}
	outcome := importplan.DerivedOutcome{Service: out.derived}
	if si := sync.CreateImport; si != nil {
		if spec := sync.ImportSpec(si, outcome); spec != nil {
			si.Spec = *spec
		}
		if err := c.Create(ctx, si); err != nil {
			return nil, err
		}
		out.si = si
	}
	for _, s := range sync.Slices.Create {
		importplan.BindOwner(s, out.si)
		if err := c.Create(ctx, s); err != nil {
			return nil, err
		}
		out.imported = append(out.imported, *s)
	}
	if len(sync.Slices.Update) > 0 || len(sync.Slices.Delete) > 0 {
		return nil, fmt.Errorf("%s/%s: the floor creates imported slices only", namespace, fleetService(i))
	}
	if status := sync.ImportStatus(out.si, outcome); status != nil {
		si := out.si.DeepCopy()
		si.Status = status.Status
		if err := c.Status().Update(ctx, si); err != nil {
			return nil, err
		}
		out.si = si
	}
	return out, nil
}

// exportStatus is the status the export controller gives member m's export of Service i once
// it is published, without conflicts among exporters.
func (f *fleet) exportStatus(export *mcsv1beta1.ServiceExport, in floorInputs, m, i int, exporters []int) mcsv1beta1.ServiceExportStatus {
	var records []merge.Record
	for _, e := range exporters {
		records = append(records, in.records[e][i])
	}
	conflict, _ := merge.Merge(records).ConflictFor(f.set.IDs[m])
	status := export.Status.DeepCopy()
	for _, cond := range []metav1.Condition{
		{Type: string(mcsv1beta1.ServiceExportConditionValid), Status: metav1.ConditionTrue,
			Reason: string(mcsv1beta1.ServiceExportReasonValid), Message: "The Service can be exported"},
		{Type: string(mcsv1beta1.ServiceExportConditionReady), Status: metav1.ConditionTrue,
			Reason: string(mcsv1beta1.ServiceExportReasonExported), Message: "Published to the ClusterSet's broker as cluster " + f.set.IDs[m]},
		conflict.Condition(),
	} {
		cond.ObservedGeneration = export.Generation
		meta.SetStatusCondition(&status.Conditions, cond)
	}
	return *status
}

// floorObjects are what a member holds before a phase begins and the phase writes to: the
// user's ServiceExports, and a rejoining member's peers' imports.
type floorObjects struct {
	exports []*mcsv1beta1.ServiceExport
	imports []*floorImport
}

// floorExisting creates, untimed, what the phase starts from: the exports whose status the
// floor writes, and each peer's import of the exporters other than the newcomer.
func (f *fleet) floorExisting(ctx context.Context, members []client.Client, namespace string, in floorInputs, work floorWork) ([]floorObjects, error) {
	out := make([]floorObjects, len(members))
	for m, c := range members {
		var before []int
		for e := range f.set.Members {
			if !slices.Contains(work.exporters[m], e) {
				before = append(before, e)
			}
		}
		for i := range f.o.services {
			if work.exportStatus[m] {
				e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fleetService(i)}}
				if err := c.Create(ctx, e); err != nil {
					return nil, err
				}
				out[m].exports = append(out[m].exports, e)
			}
			if work.importsExist[m] {
				imp, err := f.writeImport(ctx, c, namespace, in, m, i, before, nil)
				if err != nil {
					return nil, err
				}
				out[m].imports = append(out[m].imports, imp)
			}
		}
	}
	return out, nil
}

// memberFloorJobs are member m's writes: per Service its import (new, or adding the newcomer
// to an existing one) and its own export's status.
func (f *fleet) memberFloorJobs(namespace string, in floorInputs, work floorWork, m int, existing floorObjects) []floorJob {
	var jobs []floorJob
	all := allMembers(len(f.set.Members))
	for i := range f.o.services {
		var have *floorImport
		exporters := work.exporters[m]
		if work.importsExist[m] {
			have, exporters = existing.imports[i], all
		}
		jobs = append(jobs, func(ctx context.Context, c client.Client) error {
			_, err := f.writeImport(ctx, c, namespace, in, m, i, exporters, have)
			return err
		})
		if work.exportStatus[m] {
			export := existing.exports[i]
			jobs = append(jobs, func(ctx context.Context, c client.Client) error {
				export.Status = f.exportStatus(export, in, m, i, all)
				return c.Status().Update(ctx, export)
			})
		}
	}
	return jobs
}

// allMembers lists the member indexes 0 to n-1.
func allMembers(n int) []int {
	all := make([]int, n)
	for m := range n {
		all[m] = m
	}
	return all
}

// brokerFloorJobs are the broker's writes: every publishing member's slice copy and record per
// Service, in the order the export controller writes them.
func (f *fleet) brokerFloorJobs(namespace string, in floorInputs, work floorWork) []floorJob {
	var jobs []floorJob
	for m, publishing := range work.publishing {
		if !publishing {
			continue
		}
		for i := range f.o.services {
			jobs = append(jobs, func(ctx context.Context, c client.Client) error {
				for _, s := range f.floorCopies(namespace, in, m, i) {
					if err := c.Create(ctx, s); err != nil {
						return err
					}
				}
				return c.Create(ctx, f.floorRecord(namespace, in, m, i))
			})
		}
	}
	return jobs
}

// floorJobs reads the workload and prepares, untimed, what the phase starts from in every API
// server, and returns each API server's timed jobs (broker first).
func (f *fleet) floorJobs(ctx context.Context, clients []client.Client, namespace string, work floorWork) ([][]floorJob, error) {
	in, err := f.readFloorInputs(ctx)
	if err != nil {
		return nil, err
	}
	existing, err := f.floorExisting(ctx, clients[1:], namespace, in, work)
	if err != nil {
		return nil, err
	}
	jobs := [][]floorJob{f.brokerFloorJobs(namespace, in, work)}
	for m := range f.set.Members {
		jobs = append(jobs, f.memberFloorJobs(namespace, in, work, m, existing[m]))
	}
	return jobs, nil
}
