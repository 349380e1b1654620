package importplan

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

var key = types.NamespacedName{Namespace: "shop", Name: "web"}

func record(cluster string, t mcsv1beta1.ServiceImportType) merge.Record {
	return merge.Record{
		ClusterID: cluster, ServiceNamespace: key.Namespace, ServiceName: key.Name, Type: t,
		ExportCreationTimestamp: metav1.Unix(100, 0),
		Ports:                   []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}
}

func source(cluster string, ready int, zone string) sliceplan.Source {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: key.Name + "-" + cluster}, AddressType: discoveryv1.AddressTypeIPv4}
	for i := 0; i < ready; i++ {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0." + string(rune('1'+i))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			Zone:       ptr.To(zone),
		})
	}
	return sliceplan.Source{Cluster: cluster, Name: s.Name, Slice: s}
}

// input is a ClusterSetIP import exported by a and b, both live, that this member has never
// materialised.
func input() Input {
	return Input{
		Key:      key,
		Records:  []merge.Record{record("a", mcsv1beta1.ClusterSetIP), record("b", mcsv1beta1.ClusterSetIP)},
		Live:     map[string]bool{"a": true, "b": true},
		Sources:  []sliceplan.Source{source("a", 2, "z1"), source("b", 1, "z1")},
		Members:  []locality.Member{{Name: "a"}, {Name: "b"}},
		Locality: locality.DefaultOptions(),
	}
}

// converged returns in as it reads once the plan for in has been written in the writer's
// order, with the derived Service's IP and the ServiceImport's UID assigned by the API server.
// A created ServiceImport takes its spec from the derived Service's outcome, and no second
// spec write follows.
func converged(t *testing.T, in Input) Input {
	t.Helper()
	plan := Plan(in)
	svc := plan.Derived.Create[0].DeepCopy()
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
	out := DerivedOutcome{Service: svc}
	si := plan.CreateImport.DeepCopy()
	si.Spec = *plan.ImportSpec(si, out)
	si.UID, si.Generation = "uid-1", 1
	if again := plan.ImportSpec(si, out); again != nil {
		t.Fatalf("a ServiceImport created with the derived Service's IPs needs a second spec write: %+v", again)
	}
	si.Status = plan.ImportStatus(si, out).Status
	in.Import, in.Derived = si, svc
	for _, s := range plan.Slices.Create {
		s = s.DeepCopy()
		BindOwner(s, si)
		in.Imported = append(in.Imported, *s)
	}
	return in
}

func TestPlanMaterialisesANewImport(t *testing.T) {
	plan := Plan(input())
	if plan.Skip != "" || plan.Teardown != nil {
		t.Fatalf("plan skips (%q) or tears down (%v)", plan.Skip, plan.Teardown)
	}
	if plan.CreateImport == nil || plan.CreateImport.Spec.Type != mcsv1beta1.ClusterSetIP || len(plan.CreateImport.Spec.IPs) != 0 {
		t.Fatalf("create import %+v, want a ClusterSetIP import without IPs yet", plan.CreateImport)
	}
	if n := len(plan.Derived.Create); n != 1 {
		t.Fatalf("%d derived Service attempts, want 1 (no IP families asked)", n)
	}
	if d := plan.Derived.Create[0]; d.Name != names.DerivedServiceName(key.Namespace, key.Name) || len(d.OwnerReferences) != 0 {
		t.Fatalf("derived %s owned by %+v: want the derived name and no owner (it is written before the ServiceImport)", d.Name, d.OwnerReferences)
	}
	if got := len(plan.Slices.Create); got != 2 || len(plan.Slices.Update)+len(plan.Slices.Delete) != 0 {
		t.Fatalf("slice changes %d creates, %d updates, %d deletes; want one create per source slice", got, len(plan.Slices.Update), len(plan.Slices.Delete))
	}
	if plan.Allocation != nil {
		t.Fatalf("allocation %+v for exports without a cluster preference", plan.Allocation)
	}
}

// Once written, the same inputs plan nothing: no write for what did not change.
func TestPlanOfAConvergedImportWritesNothing(t *testing.T) {
	in := converged(t, input())
	plan := Plan(in)
	if plan.CreateImport != nil || plan.UpdateImport != nil || plan.Derived.Update != nil || len(plan.Derived.Create) > 0 ||
		plan.Derived.Delete != nil || !plan.Slices.Empty() {
		t.Fatalf("converged import plans writes: %+v", plan)
	}
	out := DerivedOutcome{Service: in.Derived}
	if spec, status := plan.ImportSpec(in.Import, out), plan.ImportStatus(in.Import, out); spec != nil || status != nil {
		t.Fatalf("converged import rewrites spec %v or status %v", spec, status)
	}
}

func TestPlanWithoutRecordsTearsDown(t *testing.T) {
	in := converged(t, input())
	in.Records = nil
	stranger := in.Derived.DeepCopy()
	stranger.Labels = map[string]string{mcsv1beta1.LabelServiceName: "other"}
	for _, tc := range []struct {
		name        string
		derived     *corev1.Service
		deleting    bool
		wantDerived bool
		wantImport  bool
	}{
		{"ours", in.Derived, false, true, true},
		{"a Service that names another import is left alone", stranger, false, false, true},
		{"an import being deleted gets no second delete", in.Derived, true, true, false},
	} {
		in := in
		in.Derived = tc.derived
		in.Import = in.Import.DeepCopy()
		if tc.deleting {
			in.Import.DeletionTimestamp = ptr.To(metav1.Now())
		}
		td := Plan(in).Teardown
		if td == nil || len(td.Slices.Delete) != 2 || (td.DeleteDerived != nil) != tc.wantDerived || (td.DeleteImport != nil) != tc.wantImport {
			t.Errorf("%s: teardown %+v", tc.name, td)
		}
	}
}

func TestPlanSkips(t *testing.T) {
	for name, mutate := range map[string]func(*Input){
		"namespace":     func(in *Input) { in.NamespaceMissing = true },
		"being deleted": func(in *Input) { in.NamespaceTerminating = true },
		"ServiceImport": func(in *Input) {
			in.Import = &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptr.To(metav1.Now())}}
		},
		// A new import waits for members still publishing the exports they started with.
		"waiting for b, c": func(in *Input) { in.Publishing = []string{"b", "c"} },
		// A member that has just started does not know yet who is still publishing.
		"Leases to be read": func(in *Input) { in.PublishingUnknown = true },
	} {
		in := input()
		mutate(&in)
		plan := Plan(in)
		if !strings.Contains(plan.Skip, name) || plan.CreateImport != nil || !plan.Slices.Empty() {
			t.Errorf("%s: plan %+v, want a skip that names it", name, plan)
		}
		// The reader stops once SkipReason speaks: what it has not read yet must not matter.
		early := in
		early.Derived, early.Imported, early.Sources, early.Live, early.Members = nil, nil, nil, nil, nil
		if got := SkipReason(early); got != plan.Skip {
			t.Errorf("%s: read up to the publishing members, the sync skips for %q, read whole for %q", name, got, plan.Skip)
		}
	}
	if reason := SkipReason(input()); reason != "" {
		t.Errorf("a new import nobody waits for skips: %s", reason)
	}
}

// A member publishing its first exports knows its own: it waits for its own part of a Service
// only until its record is in the broker cache, and for peers still publishing until they are
// done.
func TestNewImportsWaitForTheirOwnPartOnlyUntilItsRecordIsCached(t *testing.T) {
	for _, tc := range []struct {
		name         string
		publishing   []string
		exportedHere bool
		recordsFrom  []string
		want         []string
	}{
		{name: "nobody publishing", recordsFrom: []string{"b"}},
		{name: "a peer publishing", publishing: []string{"b"}, recordsFrom: []string{"b"}, want: []string{"b"}},
		{name: "own record cached", publishing: []string{"a"}, exportedHere: true, recordsFrom: []string{"a", "b"}},
		{name: "own record not cached yet", publishing: []string{"a"}, exportedHere: true, recordsFrom: []string{"b"}, want: []string{"a"}},
		{name: "not exported here", publishing: []string{"a"}, recordsFrom: []string{"b"}},
		{name: "own part done, a peer still publishing", publishing: []string{"a", "c"}, exportedHere: true, recordsFrom: []string{"a", "b"}, want: []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input()
			in.Self, in.Publishing, in.ExportedHere = "a", slices.Clone(tc.publishing), tc.exportedHere
			in.Records = nil
			for _, c := range tc.recordsFrom {
				in.Records = append(in.Records, record(c, mcsv1beta1.ClusterSetIP))
			}
			got := waitingFor(in)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("waiting for %v, want %v", got, tc.want)
			}
			if plan := Plan(in); (plan.Skip != "") != (len(tc.want) > 0) || (plan.CreateImport == nil) != (len(tc.want) > 0) {
				t.Fatalf("plan skip %q, creates the import: %v", plan.Skip, plan.CreateImport != nil)
			}
			if !slices.Equal(in.Publishing, tc.publishing) {
				t.Fatalf("waitingFor changed its input to %v", in.Publishing)
			}
		})
	}
}

// Members still publishing hold back only imports that do not exist yet: an existing one
// follows every change at once.
func TestPlanOnlyNewImportsWaitForPublishingMembers(t *testing.T) {
	in := converged(t, input())
	in.Publishing = []string{"b"}
	in.Live = map[string]bool{"a": true}
	if plan := Plan(in); plan.Skip != "" || len(plan.Slices.Delete) != 1 {
		t.Fatalf("an existing import waited: skip %q, slice deletes %d", plan.Skip, len(plan.Slices.Delete))
	}
}

// A lapsed exporter's endpoints leave, and the status write announces it as withdrawn; with
// every exporter lapsed the import and its ClusterSetIP stay, without endpoints.
func TestPlanWithdrawsLapsedExporters(t *testing.T) {
	in := converged(t, input())
	in.Live = map[string]bool{"a": true}
	plan := Plan(in)
	if len(plan.Slices.Delete) != 1 || plan.Slices.Delete[0].Labels[mcsv1beta1.LabelSourceCluster] != "b" {
		t.Fatalf("deletes %v, want b's imported slice", plan.Slices.Delete)
	}
	w := plan.ImportStatus(in.Import, DerivedOutcome{Service: in.Derived})
	if w == nil || len(w.Announce) != 1 || w.Announce[0].Reason != ReasonClusterWithdrawn {
		t.Fatalf("status write %+v, want b announced as withdrawn", w)
	}

	in.Live = nil
	plan = Plan(in)
	if plan.Derived.Delete != nil || len(plan.Slices.Delete) != 2 || plan.UpdateImport != nil {
		t.Fatalf("all lapsed: plan %+v, want only the slices gone", plan)
	}
	w = plan.ImportStatus(in.Import, DerivedOutcome{Service: in.Derived})
	ready := w.Status.Conditions[0]
	if ready.Status != metav1.ConditionTrue || !strings.Contains(ready.Message, "lost its lease") || w.Status.Clusters != nil {
		t.Fatalf("all lapsed: status %+v", w.Status)
	}
}

func TestPlanRecreatesTheDerivedServiceWhenFamiliesChange(t *testing.T) {
	in := converged(t, input())
	in.Derived.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	for i := range in.Records {
		in.Records[i].IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	}
	plan := Plan(in)
	if plan.Derived.Delete == nil || !plan.Derived.Recreate || len(plan.Derived.Create) != 1 || plan.Derived.Create[0].Spec.IPFamilies[0] != corev1.IPv6Protocol {
		t.Fatalf("derived plan %+v, want IPv4 deleted and IPv6 created", plan.Derived)
	}
	for i := range in.Records {
		in.Records[i].Type = mcsv1beta1.Headless
	}
	plan = Plan(in)
	if plan.Derived.Delete == nil || plan.Derived.Recreate || len(plan.Derived.Create) != 0 {
		t.Fatalf("headless: derived plan %+v, want the Service deleted for good", plan.Derived)
	}
	if plan.Slices.Update == nil || plan.Slices.Update[0].Labels[discoveryv1.LabelServiceName] == in.Derived.Name {
		t.Fatalf("headless: slices %+v, want them to stop naming the derived Service", plan.Slices)
	}
}

// PreferSameCluster exports get the allocation on the derived Service: on the create itself for
// a new Service, and in one update together with any other change for an existing one.
func TestPlanPublishesTheAllocationWithTheDerivedService(t *testing.T) {
	in := input()
	for i := range in.Records {
		in.Records[i].ClusterTrafficDistribution = ptr.To(v1alpha1.PreferSameCluster)
	}
	in.Members = []locality.Member{
		{Name: "a", HasCPU: true, CPU: locality.NodeCPU{MilliCPU: 4000}},
		{Name: "b", HasCPU: true, CPU: locality.NodeCPU{MilliCPU: 4000}},
	}
	plan := Plan(in)
	if plan.Allocation == nil || plan.Derived.Create[0].Annotations[allocation.Annotation] != plan.Allocation.Annotation {
		t.Fatalf("allocation %+v on the created Service %v", plan.Allocation, plan.Derived.Create[0].Annotations)
	}
	in = converged(t, in)
	if again := Plan(in); again.Allocation != nil || again.Derived.Update != nil {
		t.Fatalf("a published allocation is rewritten: %+v", again.Derived.Update)
	}
	for i := range in.Records {
		in.Records[i].ClusterTrafficDistribution = nil
	}
	plan = Plan(in)
	if plan.Derived.Update == nil || plan.Derived.Update.Annotations[allocation.Annotation] != "" {
		t.Fatalf("preference dropped: update %+v, want the annotation removed", plan.Derived.Update)
	}
}

// The import reconciler hands Plan the cache's own objects, uncopied (its lists read with
// client.UnsafeDisableDeepCopy): planning and concluding a sync must leave every input as it
// found it, or the next sync of any Service would read what this one scribbled.
func TestPlanLeavesItsInputAsItFoundIt(t *testing.T) {
	lapsed := func(in Input) Input { in.Live = map[string]bool{"a": true}; return in }
	teardown := func(in Input) Input { in.Records = nil; return in }
	refamilied := func(in Input) Input {
		for i := range in.Records {
			in.Records[i].IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
			in.Records[i].Type = mcsv1beta1.Headless
		}
		return in
	}
	preferring := func(in Input) Input {
		for i := range in.Records {
			in.Records[i].ClusterTrafficDistribution = ptr.To(v1alpha1.PreferSameCluster)
		}
		return in
	}
	changed := func(in Input) Input {
		in.Sources = []sliceplan.Source{source("a", 3, "z2"), source("b", 1, "z1")}
		return in
	}
	for name, build := range map[string]func() Input{
		"new":                     input,
		"converged":               func() Input { return converged(t, input()) },
		"an exporter lapsed":      func() Input { return lapsed(converged(t, input())) },
		"torn down":               func() Input { return teardown(converged(t, input())) },
		"families and type moved": func() Input { return refamilied(converged(t, input())) },
		"same-cluster preference": func() Input { return preferring(converged(t, preferring(input()))) },
		"endpoints changed":       func() Input { return changed(converged(t, input())) },
		"tiered selection":        tieredInput,
		"tiered, converged":       func() Input { return converged(t, tieredInput()) },
	} {
		in := build()
		untouched := copyInput(in)
		plan := Plan(in)
		if si := in.Import; si != nil {
			out := DerivedOutcome{Service: in.Derived}
			plan.ImportSpec(si, out)
			plan.ImportStatus(si, out)
		}
		if !equality.Semantic.DeepEqual(in, untouched) {
			t.Errorf("%s: Plan changed its input:\n%s", name, diff.Diff(untouched, in))
		}
	}
}

// copyInput copies every object and collection in reaches, so that changes through in show.
func copyInput(in Input) Input {
	out := in
	out.Records = nil
	for i := range in.Records {
		out.Records = append(out.Records, *in.Records[i].DeepCopy())
	}
	out.Live = maps.Clone(in.Live)
	out.Import, out.Derived = in.Import.DeepCopy(), in.Derived.DeepCopy()
	out.Imported = nil
	for i := range in.Imported {
		out.Imported = append(out.Imported, *in.Imported[i].DeepCopy())
	}
	out.Sources = slices.Clone(in.Sources)
	for i := range out.Sources {
		out.Sources[i].Slice = out.Sources[i].Slice.DeepCopy()
	}
	out.Members = slices.Clone(in.Members)
	for i := range out.Members {
		out.Members[i].Properties = maps.Clone(out.Members[i].Properties)
	}
	out.Publishing = slices.Clone(in.Publishing)
	return out
}
