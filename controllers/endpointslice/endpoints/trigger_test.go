package endpoints

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func readyAt(p *corev1.Pod, t time.Time) *corev1.Pod {
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t)
	return p
}

func TestLastChangeTriggerTime(t *testing.T) {
	svc := service()
	created := svc.CreationTimestamp.Time
	t1, t2, t3 := epoch.Add(time.Minute), epoch.Add(2*time.Minute), epoch.Add(3*time.Minute)

	// First sync: the Service's creation time, whatever the Pods say.
	got, state := LastChangeTriggerTime(nil, svc, PodsOf([]*corev1.Pod{readyAt(pod("a"), t2)}))
	if !got.Equal(created) {
		t.Errorf("first sync: got %v, want Service creation %v", got, created)
	}
	// Nothing new: zero, the annotation is removed.
	got, state = LastChangeTriggerTime(&state, svc, PodsOf([]*corev1.Pod{readyAt(pod("a"), t2)}))
	if !got.IsZero() {
		t.Errorf("no change: got %v, want zero", got)
	}
	// Two Pods changed: the earliest change.
	got, state = LastChangeTriggerTime(&state, svc, PodsOf([]*corev1.Pod{readyAt(pod("a"), t3), readyAt(pod("b"), t1)}))
	if !got.Equal(t1) {
		t.Errorf("two changes: got %v, want the earliest %v", got, t1)
	}
	// A Pod deleted leaves no trigger time behind.
	got, state = LastChangeTriggerTime(&state, svc, PodsOf([]*corev1.Pod{readyAt(pod("a"), t3)}))
	if !got.IsZero() {
		t.Errorf("Pod deleted: got %v, want zero", got)
	}
	// A Pod without a Ready condition is no trigger.
	noReady := pod("c")
	noReady.Status.Conditions = nil
	got, state = LastChangeTriggerTime(&state, svc, PodsOf([]*corev1.Pod{readyAt(pod("a"), t3), noReady, nil}))
	if !got.IsZero() {
		t.Errorf("Pod without Ready: got %v, want zero", got)
	}
	if _, ok := state.Pods["c"]; ok {
		t.Errorf("Pod without Ready recorded in state")
	}
	// A Service recreated later than the Pods' changes counts too.
	recreated := service(func(s *corev1.Service) { s.CreationTimestamp = metav1.NewTime(t3.Add(time.Minute)) })
	got, _ = LastChangeTriggerTime(&state, recreated, PodsOf([]*corev1.Pod{readyAt(pod("a"), t3)}))
	if !got.Equal(t3.Add(time.Minute)) {
		t.Errorf("Service recreated: got %v, want its creation", got)
	}
	if got, _ := LastChangeTriggerTime(nil, nil, PodsOf(nil)); !got.IsZero() {
		t.Errorf("nil Service: got %v, want zero", got)
	}
}

func TestTriggerTimeAnnotation(t *testing.T) {
	if _, ok := TriggerTimeAnnotation(time.Time{}); ok {
		t.Errorf("zero time must remove the annotation")
	}
	local := time.Date(2026, 1, 2, 4, 4, 5, 123, time.FixedZone("CET", 3600))
	if got, ok := TriggerTimeAnnotation(local); !ok || got != "2026-01-02T03:04:05.000000123Z" {
		t.Errorf("got %q %v, want UTC RFC 3339 with nanoseconds", got, ok)
	}
}
