package endpoints

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TriggerState is what one sync of a Service saw, remembered so the next sync
// can tell which changes are new. The reconciler keeps one per Service and
// forgets it when the Service is deleted.
type TriggerState struct {
	// Service is the Service's trigger time: its creation time.
	Service time.Time
	// Pods maps Pod name to its trigger time: the last transition of its
	// Ready condition. Pods without one are absent.
	Pods map[string]time.Time
}

// LastChangeTriggerTime computes the value of the
// endpoints.kubernetes.io/last-change-trigger-time annotation for a sync of
// svc with the Pods its selector matches, given what the previous sync of
// this Service saw (nil if this is its first sync since the controller
// started), and returns the state to remember for the next sync.
//
// Upstream's rule, which network-programming-latency SLIs depend on:
//   - the first sync of a Service reports the Service's creation time;
//   - later syncs report the EARLIEST trigger time that is newer than what the
//     previous sync saw for the same object (a Pod's Ready transition, the
//     Service's creation), because latency is measured from the oldest change
//     not yet reflected in the slices;
//   - when no such change exists (for example a Pod was deleted, which leaves
//     no trigger time behind), the result is the zero time and the annotation
//     must be removed from the slices written in this sync.
//
// Pod creation and deletion times are not trigger times; only the Ready
// condition's lastTransitionTime is, as upstream. The result is in the
// location of the inputs; write it as UTC RFC 3339 with nanoseconds.
func LastChangeTriggerTime(prev *TriggerState, svc *corev1.Service, pods []*Pod) (time.Time, TriggerState) {
	next := TriggerState{Pods: make(map[string]time.Time, len(pods))}
	if svc == nil {
		return time.Time{}, next
	}
	next.Service = svc.CreationTimestamp.Time
	var prevPods map[string]time.Time
	var prevService time.Time
	if prev != nil {
		prevPods, prevService = prev.Pods, prev.Service
	}
	var earliest time.Time
	consider := func(t time.Time) {
		if earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		t := pod.ReadyTransition
		if t.IsZero() {
			continue
		}
		next.Pods[pod.Name] = t
		if t.After(prevPods[pod.Name]) {
			consider(t)
		}
	}
	if next.Service.After(prevService) {
		consider(next.Service)
	}
	if prev == nil {
		return svc.CreationTimestamp.Time, next
	}
	return earliest, next
}

// TriggerTimeAnnotation formats t as the annotation value upstream writes,
// or reports false when t is zero and the annotation must be removed.
func TriggerTimeAnnotation(t time.Time) (string, bool) {
	if t.IsZero() {
		return "", false
	}
	return t.UTC().Format(time.RFC3339Nano), true
}
