package liveness

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

func TestStartsWaitForLiveAnnouncersWithinTheBound(t *testing.T) {
	const bound = 2 * time.Minute
	// a (self) and b announce; c announced and finished; d announces but its lease lapsed.
	v := steady([]Lease{lease("a", 0, 30*time.Second), lease("b", 0, 30*time.Second),
		lease("c", 0, 30*time.Second), lease("d", -time.Hour, 30*time.Second)})
	if v.IsLive("d") {
		t.Fatal("d should be lost")
	}
	announced := map[string]string{"a": "t1", "b": "t1", "c": "", "d": "t1"}
	starts := ObserveStarts(nil, announced, t0)
	if got, want := starts.Waiting(v, t0, bound), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("waiting %v, want %v", got, want)
	}
	if got := starts.NextDeadline(v, t0, bound); !got.Equal(t0.Add(bound)) {
		t.Fatalf("deadline %v, want %v", got, t0.Add(bound))
	}

	// a minute later b restarts (a new announcement): its bound starts again; a's does not.
	later := t0.Add(time.Minute)
	announced["b"] = "t2"
	starts = ObserveStarts(starts, announced, later)
	if got := starts.NextDeadline(v, later, bound); !got.Equal(t0.Add(bound)) {
		t.Fatalf("deadline %v, want a's %v", got, t0.Add(bound))
	}
	// past a's bound only b is waited for, until its own bound.
	pastA := t0.Add(bound)
	if got, want := starts.Waiting(v, pastA, bound), []string{"b"}; !slices.Equal(got, want) {
		t.Fatalf("waiting %v, want %v", got, want)
	}
	if got := starts.NextDeadline(v, pastA, bound); !got.Equal(later.Add(bound)) {
		t.Fatalf("deadline %v, want b's %v", got, later.Add(bound))
	}
	// b finishes: nobody is waited for.
	announced["b"] = ""
	starts = ObserveStarts(starts, announced, pastA)
	if got := starts.Waiting(v, pastA, bound); len(got) > 0 {
		t.Fatalf("waiting %v after b finished", got)
	}
	if got := starts.NextDeadline(v, pastA, bound); !got.IsZero() {
		t.Fatalf("deadline %v with nobody waited for", got)
	}
	// A bound of 0 waits for nobody.
	if got := ObserveStarts(nil, map[string]string{"a": "t1"}, t0).Waiting(v, t0, 0); len(got) > 0 {
		t.Fatalf("waiting %v with no bound", got)
	}
}

func TestPublishingSinceReadsTheAnnotation(t *testing.T) {
	with := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.AnnotationPublishingSince: "2026-12-05T12:00:00Z"}}}
	if got := PublishingSince(with); got != "2026-12-05T12:00:00Z" {
		t.Fatalf("got %q", got)
	}
	if got := PublishingSince(&coordinationv1.Lease{}); got != "" {
		t.Fatalf("got %q from a Lease without it", got)
	}
	if got := PublishingSince(nil); got != "" {
		t.Fatalf("got %q from no Lease", got)
	}
}
