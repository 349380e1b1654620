package agent

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/agent/selection"
	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// byteSource hands out the fuzzer's bytes, zeros once they run out.
type byteSource []byte

func (b *byteSource) next() byte {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return v
}

// dressed adds to fuzzInputs' objects everything a real cluster puts on them that no decision of
// the agent reads (last-applied annotations, selectors, target references, extra addresses,
// managed fields, status conditions...) and, driven by the bytes, what some decisions do read: a
// ServiceImport owning the Service with the cluster allocation, a UID that does or does not
// match, load-balancer ingress, external IPs, trigger times, source-cluster labels and zones.
func dressed(data []byte) (ServiceInputs, *corev1.Node) {
	in := fuzzInputs(data)
	src := byteSource(data)
	if len(data) > 16 {
		src = byteSource(data[len(data)/2:])
	}
	b := src.next()
	svc := in.Service
	svc.UID, svc.ResourceVersion, svc.Generation = "svc-uid", fmt.Sprint(src.next()), 3
	svc.Labels = map[string]string{"app": "web", mcsv1beta1.LabelServiceName: "web"}
	svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 200)}
	svc.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	svc.Spec.Selector = map[string]string{"app": "web"}
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	svc.Spec.PublishNotReadyAddresses = b&1 != 0
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].TargetPort = intstr.FromString("web")
		svc.Spec.Ports[i].AppProtocol = ptr.To("http")
	}
	svc.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Fine"}}
	if b&2 != 0 {
		svc.Spec.ExternalIPs = []string{"192.0.2.1"}
	}
	if b&4 != 0 {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.2", Ports: []corev1.PortStatus{{Port: 80}}}}
	}
	if b&8 != 0 {
		svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(src.next()) - 10)}}
	}
	if b&128 != 0 {
		// The name the import controller gives the derived Service of ServiceImport web.
		svc.Name = names.DerivedServiceName(svc.Namespace, "web")
	}
	if b&16 != 0 {
		uid := types.UID([]string{"", "imp-uid", "other-uid"}[int(src.next())%3])
		svc.OwnerReferences = []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"},
			{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: mcsv1beta1.ServiceImportKindName, Name: "web", UID: uid},
		}
		a := allocation.Allocation{Mode: "Spill", Clusters: []allocation.Cluster{
			{Cluster: "east", Local: 0.5, Spill: []allocation.Share{{To: "west", Share: 0.5}},
				Zones: []allocation.Zone{{Zone: "zone-a", InZone: 0.3, OtherZones: []allocation.Share{{To: "zone-b", Share: 0.2}}}}},
			{Cluster: "west", Local: 1, Intake: []allocation.Share{{To: "zone-a", Share: 1}}},
		}}
		svc.Annotations[allocation.Annotation] = a.String()
		in.Import = &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: svc.Namespace, UID: "imp-uid", ResourceVersion: "9",
				Annotations: map[string]string{"note": "x"}, ManagedFields: svc.ManagedFields},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.10", "fd00:10::b"}[:1+int(src.next())%2],
				Ports: []mcsv1beta1.ServicePort{{Port: 80}}},
		}
		if b&32 != 0 {
			in.Import.Spec.Type = mcsv1beta1.Headless
		}
	}
	for i, sl := range in.Slices {
		dressSlice(sl, i, &src)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: "5", Labels: map[string]string{"kubernetes.io/hostname": "node-a"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Status: corev1.NodeStatus{Images: []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1 << 20}}},
	}
	if b&64 != 0 {
		node.Labels[ZoneLabel] = "zone-a"
	}
	return in, node
}

func dressSlice(sl *discoveryv1.EndpointSlice, i int, src *byteSource) {
	b := src.next()
	sl.Namespace, sl.ResourceVersion, sl.UID, sl.Generation = "ns", fmt.Sprint(b), "slice-uid", 2
	sl.Labels = map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	sl.Annotations = map[string]string{"note": "not read"}
	sl.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	sl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web"}}
	if b&1 != 0 {
		sl.Labels[mcsv1beta1.LabelSourceCluster] = []string{"east", "west"}[i%2]
	}
	if b&2 != 0 {
		sl.Annotations[corev1.EndpointsLastChangeTriggerTime] = time.Unix(int64(b), 0).UTC().Format(time.RFC3339Nano)
	}
	for j := range sl.Ports {
		sl.Ports[j].AppProtocol = ptr.To("http")
	}
	for j := range sl.Endpoints {
		e := &sl.Endpoints[j]
		eb := src.next()
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprint("pod-", j), UID: "pod-uid"}
		e.Hostname = ptr.To("host")
		e.DeprecatedTopology = map[string]string{"kubernetes.io/hostname": "node-a"}
		if eb&1 != 0 {
			e.Addresses = append(e.Addresses, "10.9.9.9")
		}
		if eb&2 != 0 {
			e.Zone = ptr.To([]string{"zone-a", "zone-b"}[int(eb>>2)%2])
		}
		if eb&8 != 0 {
			h := &discoveryv1.EndpointHints{ForNodes: []discoveryv1.ForNode{{Name: "node-a"}}}
			if e.Hints != nil {
				h.ForZones = e.Hints.ForZones
			}
			e.Hints = h
		}
		if eb&16 != 0 {
			e.Addresses = nil
		}
	}
}

func trimmedAs[T any](t *testing.T, obj T) T {
	t.Helper()
	out, err := TrimObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := out.(T)
	if !ok {
		t.Fatalf("TrimObject turned %T into %T", obj, out)
	}
	again, _ := TrimObject(v)
	if !reflect.DeepEqual(again, v) {
		t.Fatalf("trimming twice changed the object:\n%+v\n%+v", again, v)
	}
	return v
}

// FuzzTrimKeepsEveryDecision: whatever the objects, the agent decides the same from trimmed
// objects as from whole ones: the dataplane input of every node (Convert, with the
// ServiceImport's IPs and the cluster allocation), which Service a slice belongs to and its
// trigger time, which ServiceImport owns a Service, whether an update is a resync, and the zone.
// Trimming is idempotent, and copies nothing it was given into what it keeps twice.
func FuzzTrimKeepsEveryDecision(f *testing.F) {
	f.Add([]byte{0, 1, 0x05, 80, 1, 0, 1, 0x05, 88, 3, 0, 2, 8, 2, 0x7f, 0x12, 1, 2, 3, 4, 5, 6})
	f.Add([]byte{3, 2, 0x81, 80, 0x85, 53, 3, 1, 2, 0x01, 80, 8, 1, 0x12, 9, 0x16, 2, 0x36, 0x5e, 1, 0xff, 0x0b})
	f.Add([]byte{7, 3, 1, 200, 2, 1, 3, 0, 0, 1, 1, 8, 10, 18, 11, 50, 0x1c, 1, 2, 0x0f, 0x1a, 3})
	// Found by the fuzzer: zones that only the cluster allocation reads.
	f.Add([]byte("01C010110901000B0A"))
	// Zone hints that narrow the endpoints.
	f.Add([]byte("01C010210001A10A00AY00000"))
	f.Fuzz(func(t *testing.T, data []byte) {
		full, fullNode := dressed(data)
		trimmed := ServiceInputs{Service: trimmedAs(t, full.Service.DeepCopy())}
		if full.Import != nil {
			trimmed.Import = trimmedAs(t, full.Import.DeepCopy())
		}
		for _, sl := range full.Slices {
			trimmed.Slices = append(trimmed.Slices, trimmedAs(t, sl.DeepCopy()))
		}
		node := trimmedAs(t, fullNode.DeepCopy())
		if got, want := node.Labels[ZoneLabel], fullNode.Labels[ZoneLabel]; got != want || node.Name != fullNode.Name {
			t.Fatalf("node %s zone %q, want %s zone %q", node.Name, got, fullNode.Name, want)
		}
		for _, n := range []selection.Node{{Name: "node-a", Zone: "zone-a", Cluster: "east"}, {Name: "node-b", Cluster: "west"}, {}} {
			if got, want := Convert(trimmed, n), Convert(full, n); !reflect.DeepEqual(got, want) {
				t.Fatalf("node %+v: trimmed objects convert to\n%+v\nwhole ones to\n%+v", n, got, want)
			}
		}
		key := types.NamespacedName{Namespace: "ns", Name: "web"}
		s, whole := newStore("node-a", time.Time{}, func() {}), newStore("node-a", time.Time{}, func() {})
		if full.Import != nil {
			s.imports[key], whole.imports[key] = trimmed.Import, full.Import
		}
		if (s.importFor(trimmed.Service) == nil) != (whole.importFor(full.Service) == nil) {
			t.Fatalf("whether a ServiceImport owns the Service differs")
		}
		// Which ServiceImport a Service belongs to, as the store records it.
		s.setService(types.NamespacedName{Namespace: "ns", Name: trimmed.Service.Name}, trimmed.Service)
		whole.setService(types.NamespacedName{Namespace: "ns", Name: full.Service.Name}, full.Service)
		if !reflect.DeepEqual(s.derived, whole.derived) || trimmed.Service.ResourceVersion != full.Service.ResourceVersion {
			t.Fatalf("derived Services %v, want %v", s.derived, whole.derived)
		}
		for i, sl := range trimmed.Slices {
			whole := full.Slices[i]
			if sl.Labels[discoveryv1.LabelServiceName] != whole.Labels[discoveryv1.LabelServiceName] ||
				!triggerTime(sl).Equal(triggerTime(whole)) || sl.ResourceVersion != whole.ResourceVersion || sl.Name != whole.Name ||
				sl.Annotations[corev1.EndpointsLastChangeTriggerTime] != whole.Annotations[corev1.EndpointsLastChangeTriggerTime] {
				t.Fatalf("slice %s: what the event handler reads differs", whole.Name)
			}
		}
	})
}

func TestTrimLeavesTombstonesAndOtherKinds(t *testing.T) {
	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/web", Obj: &corev1.Service{}}
	if got, err := TrimObject(tomb); err != nil || !reflect.DeepEqual(got, tomb) {
		t.Fatalf("tombstone changed: %v %v", got, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}, Data: map[string]string{"k": "v"}}
	got, _ := TrimObject(cm.DeepCopy())
	cm.ManagedFields = nil
	if !reflect.DeepEqual(got, cm) {
		t.Fatalf("another kind lost more than its managed fields: %+v", got)
	}
}

// A trimmed slice of many endpoints holds each Node name, zone and hint once.
func TestTrimSharesNamesAndHints(t *testing.T) {
	sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	for i := range 100 {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprint("10.0.0.", i)},
			NodeName:   ptr.To(fmt.Sprint("node-", i%3)),
			Zone:       ptr.To("zone-a"),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}},
		})
	}
	got := trimmedAs(t, sl.DeepCopy())
	first, last := got.Endpoints[0], got.Endpoints[99]
	if first.Zone != last.Zone || first.Hints != last.Hints || first.Conditions.Ready != last.Conditions.Ready ||
		first.NodeName != got.Endpoints[3].NodeName {
		t.Fatalf("endpoints hold their own copies of shared values")
	}
}
