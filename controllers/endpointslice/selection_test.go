package endpointslice

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// optedIn is a selector-less Service carrying its selector in the annotation.
func optedIn(selector string) *corev1.Service {
	svc := testService()
	svc.Spec.Selector = nil
	svc.Annotations = map[string]string{SelectorAnnotation: selector}
	return svc
}

func TestScopeOptionsAreValidated(t *testing.T) {
	o := DefaultOptions()
	o.Services = "some"
	if err := o.Validate(); err == nil {
		t.Error("an unknown scope was accepted")
	}
	o = DefaultOptions()
	o.Services, o.AdoptUpstreamSlices = ScopeOptedIn, true
	if err := o.Validate(); err == nil {
		t.Error("adopting kube-controller-manager's slices while it keeps writing them was accepted")
	}
	var s ServiceScope
	if err := s.Set("opted-in"); err != nil || s != ScopeOptedIn {
		t.Errorf("Set(opted-in) = %v, %q", err, s)
	}
	if err := s.Set("none"); err == nil {
		t.Error("Set(none) accepted")
	}
}

func TestOptedInScopeServesOnlyAnnotatedServices(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	web := optedIn("app=web")
	web.Name = "opted"
	legacy := testService()
	legacy.Name = "legacy"
	leftover := ourSlice(legacy, "legacy-ours", port(8080), "10.0.0.9")
	a := pod("a", map[string]string{"app": "web"}, "10.0.0.1", true)
	a.Spec.NodeName = node.Name
	a.Status.PodIPs = []corev1.PodIP{{IP: a.Status.PodIP}}
	r := fakeReconciler(t, node, web, legacy, leftover, a)
	r.Options.Services = ScopeOptedIn
	ctx := context.Background()

	for _, svc := range []*corev1.Service{web, legacy} {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := sliceAddresses(t, r, "opted"); len(got) != 1 || got[0] != "10.0.0.1" {
		t.Errorf("the opted-in Service's slices hold %v, want its Pod 10.0.0.1", got)
	}
	if got := sliceAddresses(t, r, "legacy"); got != nil {
		t.Errorf("a Service kube-controller-manager serves kept slices of ours: %v", got)
	}

	// A Pod change reaches the opted-in Service, not the other.
	q := newRecordingQueue()
	b := pod("b", map[string]string{"app": "web"}, "10.0.0.2", true)
	r.podChanged(ctx, nil, b, q)
	want := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: web.Namespace, Name: "opted"}}
	if _, ok := q.delays[want]; !ok || len(q.delays) != 1 {
		t.Errorf("a new Pod queued %v, want only %v", q.delays, want)
	}
}

func TestInvalidAnnotationKeepsTheSlices(t *testing.T) {
	svc := optedIn("app=web")
	kept := ourSlice(svc, "web-kept", port(8080), "10.0.0.1")
	r := fakeReconciler(t, svc, kept)
	r.Options.Services = ScopeOptedIn
	ctx := context.Background()
	svc.Annotations[SelectorAnnotation] = "app in (web)"
	if err := r.Client.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	invalid := map[string]string{"result": syncInvalid}
	before := metric(t, metricsPrefix+"syncs_total", invalid)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}); err != nil {
		t.Fatalf("bad input is not a retryable error: %v", err)
	}
	if got := sliceAddresses(t, r, svc.Name); len(got) != 1 || got[0] != "10.0.0.1" {
		t.Errorf("slices after a bad annotation: %v, want the one kept", got)
	}
	if got := metric(t, metricsPrefix+"syncs_total", invalid); got != before+1 {
		t.Errorf("syncs_total{result=invalid} = %v, want %v", got, before+1)
	}
	select {
	case e := <-r.Recorder.(*events.FakeRecorder).Events:
		if !strings.Contains(e, "InvalidSelectorAnnotation") || !strings.Contains(e, "app in (web)") {
			t.Errorf("event %q does not name the reason and the value", e)
		}
	default:
		t.Error("no event for an invalid annotation")
	}
}

func TestOptedInServiceTakesOverUpstreamLeftovers(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	web := optedIn("app=web")
	plain := testService()
	plain.Name = "plain"
	// What kube-controller-manager wrote while web still had spec.selector, and what it writes for plain.
	leftover := ourSlice(web, "web-upstream", port(8080), "10.0.0.1")
	leftover.Labels[discoveryv1.LabelManagedBy] = UpstreamManagedBy
	theirs := ourSlice(plain, "plain-upstream", port(8080), "10.0.0.1")
	theirs.Labels[discoveryv1.LabelManagedBy] = UpstreamManagedBy
	a := pod("a", map[string]string{"app": "web"}, "10.0.0.1", true)
	a.Spec.NodeName = node.Name
	a.Status.PodIPs = []corev1.PodIP{{IP: a.Status.PodIP}}
	r := fakeReconciler(t, node, web, plain, leftover, theirs, a)
	r.Options.Services = ScopeOptedIn
	ctx := context.Background()

	q := newRecordingQueue()
	r.sliceChanged(ctx, leftover, q)
	r.sliceChanged(ctx, theirs, q)
	if _, ok := q.delays[reconcile.Request{NamespacedName: types.NamespacedName{Namespace: web.Namespace, Name: web.Name}}]; !ok || len(q.delays) != 1 {
		t.Errorf("upstream slice changes queued %v, want only the opted-in Service", q.delays)
	}

	for _, svc := range []*corev1.Service{web, plain} {
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	managedBy := map[string]string{}
	for _, s := range list.Items {
		managedBy[s.Name] = s.Labels[discoveryv1.LabelManagedBy]
	}
	want := map[string]string{"web-upstream": ManagedBy, "plain-upstream": UpstreamManagedBy}
	if len(managedBy) != len(want) || managedBy["web-upstream"] != want["web-upstream"] || managedBy["plain-upstream"] != want["plain-upstream"] {
		t.Errorf("slices after the syncs: %v, want the leftover adopted in place and kube-controller-manager's own untouched: %v", managedBy, want)
	}
}

// sliceAddresses lists the endpoint addresses of our slices of a Service; nil without slices.
func sliceAddresses(t *testing.T, r *Reconciler, service string) []string {
	t.Helper()
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		s := &list.Items[i]
		if s.Labels[discoveryv1.LabelServiceName] != service || !r.manages(s, false) {
			continue
		}
		if out == nil {
			out = []string{}
		}
		for _, ep := range s.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	return out
}
