package multicluster

import (
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/controllers/slicewrite"
)

func importAt(resourceVersion string) client.Object {
	return &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", ResourceVersion: resourceVersion}}
}

// TestEchoesDropOnlyTheEventsOfOwnWrites: the events that bring this controller's own writes
// back are dropped, each once, in the order they come (a ServiceImport created and its status
// written before either event arrived); an event of anyone else's write, a delete, and an
// event long after the write (a watch re-established) pass.
func TestEchoesDropOnlyTheEventsOfOwnWrites(t *testing.T) {
	now := time.Unix(1000, 0)
	e := newEchoes(nil)
	e.now = func() time.Time { return now }
	passes := e.notEchoes(echoServiceImport)

	e.wrote(echoServiceImport, importAt("5")) // created
	e.wrote(echoServiceImport, importAt("6")) // its status written
	if passes.Create(event.CreateEvent{Object: importAt("5")}) {
		t.Fatal("the create's echo was enqueued")
	}
	if passes.Update(event.UpdateEvent{ObjectOld: importAt("5"), ObjectNew: importAt("6")}) {
		t.Fatal("the status write's echo was enqueued")
	}
	if !passes.Update(event.UpdateEvent{ObjectOld: importAt("6"), ObjectNew: importAt("7")}) {
		t.Fatal("someone else's update was dropped")
	}
	if !passes.Update(event.UpdateEvent{ObjectOld: importAt("6"), ObjectNew: importAt("6")}) {
		t.Fatal("an echo was dropped twice (a relist shows it again: nothing to do, but nothing is remembered of it)")
	}
	if len(e.m) != 0 {
		t.Fatalf("remembers %v once every echo came", e.m)
	}

	e.wrote(echoServiceImport, importAt("8"))
	if !passes.Delete(event.DeleteEvent{Object: importAt("8")}) || len(e.m) != 0 {
		t.Fatalf("a delete was dropped, or the write it ends is still remembered: %v", e.m)
	}
	other := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api", ResourceVersion: "9"}}
	e.wrote(echoService, importAt("9"))
	if !passes.Create(event.CreateEvent{Object: other}) || !passes.Create(event.CreateEvent{Object: importAt("9")}) {
		t.Fatal("an event of another object, or of another kind's write, was dropped")
	}

	e.wrote(echoServiceImport, importAt("10"))
	now = now.Add(2 * writtenExpiry)
	e.wrote(echoServiceImport, &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db", ResourceVersion: "11"}})
	if !passes.Update(event.UpdateEvent{ObjectOld: importAt("9"), ObjectNew: importAt("10")}) {
		t.Fatal("an echo that never came in time is still remembered")
	}
}

// TestAnEchoTellsTheImportItsCacheHoldsTheWrite: the sync an echo no longer runs used to be
// what found the cache holding the write, and forgot it; the echo now does. Left remembered, a
// ServiceImport a user deletes after it was created would look not created yet, and its sync
// would hold back until the memory expired.
func TestAnEchoTellsTheImportItsCacheHoldsTheWrite(t *testing.T) {
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	r := &importReconciler{written: newWrittenSlices()}
	r.echoes = newEchoes(r.echoShown)

	r.written.objectWritten(writtenImport, key, slicewrite.Create, "", "")
	r.echoes.wrote(echoServiceImport, importAt("5"))
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-east-x1", ResourceVersion: "6",
		Labels: map[string]string{mcsv1beta1.LabelServiceName: "web", discoveryv1.LabelManagedBy: sliceplan.ManagedBy}}}
	err := r.written.apply(key, sliceplan.Changes{Create: []*discoveryv1.EndpointSlice{slice}},
		func(_ sliceplan.Changes, landed slicewrite.Observer[*discoveryv1.EndpointSlice]) error {
			landed(slicewrite.Create, slice, 0, nil)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	r.echoes.wrote(echoSlice, slice)
	if !r.written.objectBehind(writtenImport, key, nil) {
		t.Fatal("before its echo, a created ServiceImport missing from the cache does not hold the sync back")
	}

	if r.echoes.notEchoes(echoServiceImport).Create(event.CreateEvent{Object: importAt("5")}) ||
		r.echoes.notEchoes(echoSlice).Create(event.CreateEvent{Object: slice}) {
		t.Fatal("an echo was enqueued")
	}
	if r.written.objectBehind(writtenImport, key, nil) {
		t.Fatal("after its echo, the ServiceImport deleted by a user still looks not created yet")
	}
	if r.written.behind(key, nil) {
		t.Fatal("after its echo, the imported slice deleted by someone still looks not created yet")
	}
}
