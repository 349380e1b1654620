package multicluster

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
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
	e := newEchoes()
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
