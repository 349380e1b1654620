package endpointslice

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
)

// recordingQueue remembers how each request was queued.
type recordingQueue struct {
	controllertest.Queue
	delays map[reconcile.Request]time.Duration
}

func (q *recordingQueue) Add(item reconcile.Request) { q.delays[item] = 0 }
func (q *recordingQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.delays[item] = d
}

func newRecordingQueue() *recordingQueue {
	return &recordingQueue{Queue: controllertest.Queue{TypedInterface: workqueue.NewTyped[reconcile.Request]()}, delays: map[reconcile.Request]time.Duration{}}
}

func pod(name string, labels map[string]string, ip string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
		Status: corev1.PodStatus{PodIP: ip, Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

func TestPodChangesQueueSelectingServicesWithTheBatchPeriod(t *testing.T) {
	web := testService()
	other := testService()
	other.Name, other.Spec.Selector = "other", map[string]string{"app": "other"}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(web, other).Build()
	r := testReconciler(t)
	r.Client = c
	r.Options.BatchPeriod = 2 * time.Second

	q := newRecordingQueue()
	oldPod := pod("a", map[string]string{"app": "web"}, "10.0.0.1", false)
	newPod := oldPod.DeepCopy()
	newPod.Status.Conditions[0].Status = corev1.ConditionTrue
	r.podChanged(context.Background(), oldPod, newPod, q)
	want := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: web.Namespace, Name: web.Name}}
	if len(q.delays) != 1 || q.delays[want] != 2*time.Second {
		t.Fatalf("readiness flip must queue only web after the batch period, got %v", q.delays)
	}

	// A label change that moves the Pod between Services syncs both.
	q = newRecordingQueue()
	moved := newPod.DeepCopy()
	moved.Labels = map[string]string{"app": "other"}
	r.podChanged(context.Background(), newPod, moved, q)
	if len(q.delays) != 2 {
		t.Fatalf("both the old and the new selecting Service must sync, got %v", q.delays)
	}

	// Status noise that cannot change an endpoint queues nothing.
	q = newRecordingQueue()
	noisy := newPod.DeepCopy()
	noisy.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 3}}
	r.podChanged(context.Background(), newPod, noisy, q)
	if len(q.delays) != 0 {
		t.Fatalf("irrelevant Pod updates must not sync, got %v", q.delays)
	}
}

func TestNodeZoneChangeQueuesServicesWithPodsOnTheNode(t *testing.T) {
	web := testService()
	other := testService()
	other.Name, other.Spec.Selector = "other", map[string]string{"app": "other"}
	onNode := pod("a", map[string]string{"app": "web"}, "10.0.0.1", true)
	onNode.Spec.NodeName = "n1"
	elsewhere := pod("b", map[string]string{"app": "other"}, "10.0.0.2", true)
	elsewhere.Spec.NodeName = "n2"
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(web, other, onNode, elsewhere).
		WithIndex(&corev1.Pod{}, podNodeIndex, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Service{}, serviceModeIndex, func(o client.Object) []string {
			mode, _ := hints.ModeOf(o.(*corev1.Service))
			return []string{string(mode)}
		}).
		Build()
	r := testReconciler(t)
	r.Client = c
	q := newRecordingQueue()
	oldNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelTopologyZone: "a"}}}
	newNode := oldNode.DeepCopy()
	newNode.Labels[corev1.LabelTopologyZone] = "b"
	r.nodeChanged(context.Background(), oldNode, newNode, q)
	want := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: web.Namespace, Name: web.Name}}
	if _, ok := q.delays[want]; !ok || len(q.delays) != 1 {
		t.Fatalf("only the Service with a Pod on the Node must sync, got %v", q.delays)
	}
}

func TestHandlersLogListErrors(t *testing.T) {
	failing := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("cache unavailable")
		},
	}).Build()
	r := testReconciler(t)
	r.Client = failing
	var logged []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}))
	q := newRecordingQueue()
	r.podChanged(ctx, nil, pod("a", map[string]string{"app": "web"}, "10.0.0.1", true), q)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	r.nodeChanged(ctx, nil, node, q)
	if len(q.delays) != 0 {
		t.Fatalf("nothing can be queued when listing fails, got %v", q.delays)
	}
	// One line for the Pod change; the Node change lists Pods on the Node and Auto Services.
	if len(logged) != 3 {
		t.Fatalf("want every failed list logged, got %d lines: %q", len(logged), logged)
	}
	for _, line := range logged {
		if !strings.Contains(line, "cache unavailable") {
			t.Errorf("log line without the error: %s", line)
		}
	}
}

func TestPodChangeMatters(t *testing.T) {
	web := map[string]string{"app": "web"}
	pending := pod("a", web, "", false)
	pending.Status.Phase, pending.Status.Conditions = corev1.PodPending, nil
	scheduled := pending.DeepCopy()
	scheduled.Spec.NodeName = "n1"
	relabelled := scheduled.DeepCopy()
	relabelled.Labels = map[string]string{"app": "other"}
	running := scheduled.DeepCopy()
	running.Status.Phase, running.Status.PodIP = corev1.PodRunning, "10.0.0.1"
	ready := running.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	succeeded := ready.DeepCopy()
	succeeded.Status.Phase = corev1.PodSucceeded
	finished := succeeded.DeepCopy()
	finished.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 1}}
	for _, tc := range []struct {
		name     string
		old, new *corev1.Pod
		want     bool
	}{
		{"created without an IP", nil, pending, false},
		{"scheduled without an IP", pending, scheduled, false},
		{"relabelled without an IP", scheduled, relabelled, false},
		{"deleted without an IP", scheduled, nil, false},
		{"given an IP", scheduled, running, true},
		{"created with an IP", nil, running, true},
		{"ready", running, ready, true},
		{"deleted with an IP", ready, nil, true},
		{"finished", ready, succeeded, true},
		{"changed after it finished", succeeded, finished, false},
		{"nothing at all", nil, nil, false},
	} {
		if got := PodChangeMatters(CachePod(tc.old), CachePod(tc.new)); got != tc.want {
			t.Errorf("%s: PodChangeMatters = %v, want %v", tc.name, got, tc.want)
		}
	}
}
