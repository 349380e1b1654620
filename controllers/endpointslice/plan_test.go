package endpointslice

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
)

func testService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "svc-uid", Labels: map[string]string{"team": "blue"}},
		Spec: corev1.ServiceSpec{
			Selector:   map[string]string{"app": "web"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func testReconciler(t *testing.T) *Reconciler {
	t.Helper()
	opts := DefaultOptions()
	opts.MaxEndpointsPerSlice = 3
	r, err := NewReconciler(nil, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ourSlice is an existing slice of svc with the given ports and endpoint addresses.
func ourSlice(svc *corev1.Service, name string, ports []discoveryv1.EndpointPort, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: name, UID: types.UID("uid-" + name),
			Labels:          sliceLabels(svc),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, corev1.SchemeGroupVersion.WithKind("Service"))}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// planFor plans one sync of svc the way Reconcile does, with no Nodes known.
func (r *Reconciler) planFor(svc *corev1.Service, desired endpoints.Result, existing []*discoveryv1.EndpointSlice, trigger time.Time) (*syncPlan, error) {
	mode, _ := hints.ModeOf(svc)
	return planSync(syncInput{svc: svc, desired: desired, existing: existing, mode: mode, zones: hints.ZonesFor(mode, nil), trigger: trigger}, r.Options)
}

func port(n int32) []discoveryv1.EndpointPort {
	return []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(n), Protocol: ptr.To(corev1.ProtocolTCP)}}
}

func desiredSet(ports []discoveryv1.EndpointPort, addrs ...string) endpoints.Set {
	set := endpoints.Set{Key: endpoints.KeyOf(discoveryv1.AddressTypeIPv4, ports), AddressType: discoveryv1.AddressTypeIPv4, Ports: ports}
	for _, a := range addrs {
		set.Endpoints = append(set.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return set
}

func TestPlanPlaceholder(t *testing.T) {
	svc := testService()
	r := testReconciler(t)
	cases := []struct {
		name                    string
		existing                []*discoveryv1.EndpointSlice
		creates, updates, drops int
	}{
		{"no slices: create one placeholder", nil, 1, 0, 0},
		{"placeholder already there: no writes", []*discoveryv1.EndpointSlice{ourSlice(svc, "p", nil)}, 0, 0, 0},
		{"last endpoints gone: empty the slice in place", []*discoveryv1.EndpointSlice{ourSlice(svc, "a", port(8080), "10.0.0.1")}, 0, 1, 0},
		{"two slices left: keep the placeholder, delete the other",
			[]*discoveryv1.EndpointSlice{ourSlice(svc, "a", port(8080), "10.0.0.1"), ourSlice(svc, "p", nil)}, 0, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := r.planFor(svc, endpoints.Result{}, tc.existing, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.create) != tc.creates || len(p.update) != tc.updates || len(p.delete) != tc.drops {
				t.Fatalf("writes = %d/%d/%d, want %d/%d/%d", len(p.create), len(p.update), len(p.delete), tc.creates, tc.updates, tc.drops)
			}
			for _, s := range append(p.create, p.update...) {
				if len(s.Endpoints) != 0 || len(s.Ports) != 0 {
					t.Fatalf("placeholder must have no endpoints and no ports: %+v", s)
				}
			}
		})
	}
}

func TestPlanReusesSlicesAcrossPortSets(t *testing.T) {
	svc := testService()
	r := testReconciler(t)
	existing := []*discoveryv1.EndpointSlice{
		ourSlice(svc, "a", port(8080), "10.0.0.1", "10.0.0.2", "10.0.0.3"),
		ourSlice(svc, "b", port(8080), "10.0.0.4"),
	}
	// Every Pod moved to port 9090: same endpoints, new port set.
	desired := endpoints.Result{Sets: []endpoints.Set{desiredSet(port(9090), "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")}}
	p, err := r.planFor(svc, desired, existing, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.create) != 0 || len(p.delete) != 0 || len(p.update) != 2 {
		t.Fatalf("want two in-place updates, got create=%d update=%d delete=%d", len(p.create), len(p.update), len(p.delete))
	}
	for _, s := range p.update {
		if *s.Ports[0].Port != 9090 {
			t.Fatalf("updated slice %s keeps old ports %v", s.Name, s.Ports)
		}
	}
}

func TestPlanRewritesSlicesWithStaleMetadataOnly(t *testing.T) {
	svc := testService()
	r := testReconciler(t)
	current := ourSlice(svc, "a", port(8080), "10.0.0.1")
	desired := endpoints.Result{Sets: []endpoints.Set{desiredSet(port(8080), "10.0.0.1")}}
	p, _ := r.planFor(svc, desired, []*discoveryv1.EndpointSlice{current}, time.Time{})
	if p.writes() != 0 {
		t.Fatalf("up-to-date slice must not be written, got %d writes", p.writes())
	}
	adopted := current.DeepCopy()
	adopted.Labels[discoveryv1.LabelManagedBy] = UpstreamManagedBy
	adopted.OwnerReferences = nil
	p, _ = r.planFor(svc, desired, []*discoveryv1.EndpointSlice{adopted}, metav1.Now().Time)
	if len(p.update) != 1 || len(p.create)+len(p.delete) != 0 || len(p.adopted) != 1 {
		t.Fatalf("adopted slice must be relabelled in place: %+v", p)
	}
	got := p.update[0]
	if got.Labels[discoveryv1.LabelManagedBy] != ManagedBy || got.Labels["team"] != "blue" || len(got.OwnerReferences) != 1 ||
		got.Annotations[corev1.EndpointsLastChangeTriggerTime] == "" || got.UID != adopted.UID {
		t.Fatalf("stamped slice wrong: %+v", got.ObjectMeta)
	}
}

func TestSliceLabelsCannotBeOverriddenByServiceLabels(t *testing.T) {
	svc := testService()
	svc.Labels = map[string]string{discoveryv1.LabelManagedBy: "evil", discoveryv1.LabelServiceName: "other", corev1.IsHeadlessService: "x", "keep": "me"}
	got := sliceLabels(svc)
	want := map[string]string{discoveryv1.LabelManagedBy: ManagedBy, discoveryv1.LabelServiceName: "web", "keep": "me"}
	if len(got) != len(want) {
		t.Fatalf("labels = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("labels = %v, want %v", got, want)
		}
	}
}

// The cache lists slices in no set order (a sync's creates land side by side), so the plan must
// not depend on it: every order of the same slices gets the same writes.
func TestPlanDoesNotDependOnTheOrderSlicesAreListedIn(t *testing.T) {
	svc := testService()
	r := testReconciler(t)
	existing := []*discoveryv1.EndpointSlice{
		ourSlice(svc, "web-a", port(8080), "10.0.0.1"),
		ourSlice(svc, "web-b", port(8080), "10.0.0.3", "10.0.0.4"),
		ourSlice(svc, "web-c", port(8080), "10.0.0.6"),
		ourSlice(svc, "web-d", port(8080), "10.0.0.7", "10.0.0.8", "10.0.0.9"),
	}
	desired := endpoints.Result{Sets: []endpoints.Set{desiredSet(port(8080), "10.0.0.1", "10.0.0.4", "10.0.0.6", "10.0.0.8", "10.0.0.10", "10.0.0.11")}}
	written := func(order []int) string {
		var in []*discoveryv1.EndpointSlice
		for _, i := range order {
			in = append(in, existing[i].DeepCopy())
		}
		p, err := r.planFor(svc, desired, in, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, group := range []struct {
			op     string
			slices []*discoveryv1.EndpointSlice
		}{{"create", p.create}, {"update", p.update}, {"delete", p.delete}} {
			for _, s := range group.slices {
				var addrs []string
				for _, ep := range s.Endpoints {
					addrs = append(addrs, ep.Addresses[0])
				}
				slices.Sort(addrs)
				out += fmt.Sprintf("%s %s %v; ", group.op, s.Name, addrs)
			}
		}
		return out
	}
	want := written([]int{0, 1, 2, 3})
	for _, order := range [][]int{{3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {3, 0, 2, 1}} {
		if got := written(order); got != want {
			t.Fatalf("listed in order %v: %s\nlisted a, b, c, d: %s", order, got, want)
		}
	}
}
