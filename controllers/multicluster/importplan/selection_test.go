package importplan

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

const regionKey = "region.topology.k8s.io"

// ownThenRegion is the KEP's first story without the continent.
var ownThenRegion = []v1alpha1.ClusterSelector{
	{PropertySelector: &v1alpha1.PropertySelector{MatchExpressions: []v1alpha1.PropertySelectorRequirement{
		{Key: clusterselect.ClusterIDProperty, Operator: v1alpha1.PropertySelectorOpIn, Values: []string{v1alpha1.SameAsImporter}}}}},
	{PropertySelector: &v1alpha1.PropertySelector{MatchProperties: map[string]string{regionKey: v1alpha1.SameAsImporter}}},
}

// tieredInput: a1 and a2 in region A, b1 in B, each exporting with ownThenRegion, 8 CPUs each;
// a1 has one ready endpoint, a2 four, b1 four. This member is a2.
func tieredInput() Input {
	rec := func(c string) merge.Record {
		r := record(c, mcsv1beta1.ClusterSetIP)
		r.ClusterSelectors = ownThenRegion
		return r
	}
	member := func(name, region string) locality.Member {
		return locality.Member{Name: name, HasCPU: true, CPU: locality.NodeCPU{MilliCPU: 8000},
			Properties: map[string]string{regionKey: region}}
	}
	return Input{
		Key:       key,
		Records:   []merge.Record{rec("a1"), rec("a2"), rec("b1")},
		Live:      map[string]bool{"a1": true, "a2": true, "b1": true},
		Sources:   []sliceplan.Source{source("a1", 1, "z1"), source("a2", 4, "z1"), source("b1", 4, "z1")},
		Members:   []locality.Member{member("a1", "A"), member("a2", "A"), member("b1", "B")},
		Locality:  locality.DefaultOptions(),
		Selection: locality.SelectionBounded,
		Self:      "a2",
	}
}

func TestPlanPublishesSelectorsResultsAndTheTieredAllocation(t *testing.T) {
	plan := Plan(tieredInput())
	ann := plan.CreateImport.Annotations
	if ann[v1alpha1.AnnotationClusterSelectors] != clusterselect.Format(ownThenRegion) {
		t.Fatalf("selectors annotation %q", ann[v1alpha1.AnnotationClusterSelectors])
	}
	// a2's results: itself, then region A.
	if got := ann[v1alpha1.AnnotationClusterSelectorResults]; got != `[{"clusters":["a2"]},{"clusters":["a1","a2"]}]` {
		t.Fatalf("results annotation %q", got)
	}
	a, err := allocation.Parse(plan.Derived.Create[0].Annotations[allocation.Annotation])
	if err != nil {
		t.Fatal(err)
	}
	// a1's one endpoint (of 9, fair 24000/9) carries 3333 of 8000 at +25%; the rest stays in
	// region A, at a2, which has 5333 to spare: nothing goes to b1.
	row, _ := a.For("a1")
	if len(row.Spill) != 1 || row.Spill[0].To != "a2" {
		t.Fatalf("a1's row %+v, want its spill to stay in region A", row)
	}
	// The KEP's default instead sends a1's clients to a1's one endpoint, all of them.
	in := tieredInput()
	in.Selection = locality.SelectionFirstReady
	kep, _ := allocation.Parse(Plan(in).Derived.Create[0].Annotations[allocation.Annotation])
	if row, _ := kep.For("a1"); row.Local != 1 {
		t.Fatalf("first-ready: a1's row %+v, want all at home", row)
	}
}

func TestSelectionConditionNamesMembersWithoutTheProperty(t *testing.T) {
	in := tieredInput()
	in.Members[2].Properties = nil // b1 publishes no region
	in = converged(t, in)
	c := meta.FindStatusCondition(in.Import.Status.Conditions, ConditionClusterSelection)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonClusterPropertyMissing || !strings.Contains(c.Message, "cluster b1 lacks "+regionKey) {
		t.Fatalf("condition %+v", c)
	}
	// b1 is in no result, a2's included.
	if got := in.Import.Annotations[v1alpha1.AnnotationClusterSelectorResults]; strings.Contains(got, "b1") {
		t.Fatalf("results %s select b1", got)
	}
	// Converged: nothing more to write, and no second announcement.
	if w := Plan(in).ImportStatus(in.Import, DerivedOutcome{Service: in.Derived}); w != nil {
		t.Fatalf("rewrites the status: %+v", w)
	}
	// b1 publishes its region: the condition turns True without an event.
	in.Members[2].Properties = map[string]string{regionKey: "B"}
	w := Plan(in).ImportStatus(in.Import, DerivedOutcome{Service: in.Derived})
	if w == nil || len(w.Announce) != 0 || meta.FindStatusCondition(w.Status.Conditions, ConditionClusterSelection).Status != metav1.ConditionTrue {
		t.Fatalf("resolved: %+v", w)
	}
}

func TestSelectionEventAnnouncedOnce(t *testing.T) {
	in := tieredInput()
	in.Members[0].Properties = nil
	plan := Plan(in)
	svc := plan.Derived.Create[0].DeepCopy()
	svc.Spec.ClusterIPs = []string{"10.96.0.10"}
	si := plan.CreateImport.DeepCopy()
	w := plan.ImportStatus(si, DerivedOutcome{Service: svc})
	if len(w.Announce) != 1 || w.Announce[0].Reason != ReasonClusterPropertyMissing || w.Announce[0].Type != corev1.EventTypeWarning {
		t.Fatalf("announce %+v", w.Announce)
	}
}

// A headless import (from an older member's record) carries no selection.
func TestHeadlessImportHasNoSelection(t *testing.T) {
	in := tieredInput()
	for i := range in.Records {
		in.Records[i].Type = mcsv1beta1.Headless
	}
	plan := Plan(in)
	if _, ok := plan.CreateImport.Annotations[v1alpha1.AnnotationClusterSelectors]; ok {
		t.Fatalf("headless import annotated %v", plan.CreateImport.Annotations)
	}
}
