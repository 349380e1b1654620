package builders_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// Each builder is checked against the object written out in full, so a change to what a Make
// function defaults (which every test using it inherits) shows here first.

func TestMakeService(t *testing.T) {
	got := builders.MakeService("shop", "web").
		Label("app", "web").Annotation("a", "b").Selector("app", "web").
		Port("http", 80, intstr.FromInt32(8080)).
		ServicePort(corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}).
		Type(corev1.ServiceTypeClusterIP).ClusterIP("10.0.0.10", "fd00::10").
		IPFamilies(corev1.IPv4Protocol, corev1.IPv6Protocol).UID("u").
		Owner(metav1.OwnerReference{Kind: "ServiceImport", Name: "web"}).
		InternalTrafficPolicy(corev1.ServiceInternalTrafficPolicyLocal).Obj()
	want := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "u",
			OwnerReferences: []metav1.OwnerReference{{Kind: "ServiceImport", Name: "web"}},
			Labels:          map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.ServiceSpec{
			Type:                  corev1.ServiceTypeClusterIP,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
			Selector:              map[string]string{"app": "web"},
			ClusterIP:             "10.0.0.10",
			ClusterIPs:            []string{"10.0.0.10", "fd00::10"},
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	if bare := builders.MakeService("shop", "web").Obj(); bare.Spec.Ports != nil || bare.Spec.Selector != nil || bare.Spec.Type != "" {
		t.Fatalf("MakeService must default nothing but the name: %+v", bare.Spec)
	}
	if h := builders.MakeService("shop", "web").Headless().Obj(); h.Spec.ClusterIP != corev1.ClusterIPNone || len(h.Spec.ClusterIPs) != 1 {
		t.Fatalf("headless: %+v", h.Spec)
	}
}

func TestCloneIsIndependent(t *testing.T) {
	base := builders.MakeService("shop", "web").Selector("app", "web")
	other := base.Clone().Selector("app", "other")
	if base.Obj().Spec.Selector["app"] != "web" || other.Obj().Spec.Selector["app"] != "other" {
		t.Fatal("a clone must not share maps with its original")
	}
	pod := builders.MakePod("shop", "p").Label("app", "web")
	if pod.Clone().Label("app", "x"); pod.Obj().Labels["app"] != "web" {
		t.Fatal("Pod clone shares labels")
	}
	slice := builders.MakeEndpointSlice("shop", "s").Endpoints(builders.MakeEndpoint("10.0.0.1").Obj())
	if slice.Clone().Obj().Endpoints[0].Addresses[0] = "x"; slice.Obj().Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Fatal("slice clone shares endpoints")
	}
}

func TestMakePod(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := builders.MakePod("shop", "web-0").UID("uid-0").
		Labels(map[string]string{"app": "web"}).Label("tier", "front").
		Node("node-a").Hostname("h").Subdomain("s").
		ContainerPort("http", 8080).ContainerPort("metrics", 9090).
		IPs("10.0.0.1", "fd00::1").Phase(corev1.PodRunning).Ready(false, since).Terminating(since).Obj()
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-0", UID: "uid-0",
			Labels: map[string]string{"app": "web", "tier": "front"}, DeletionTimestamp: ptr.To(metav1.NewTime(since))},
		Spec: corev1.PodSpec{NodeName: "node-a", Hostname: "h", Subdomain: "s", Containers: []corev1.Container{{
			Name: "app", Image: builders.PodImage, Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
			},
		}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(since)}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	ports := []corev1.ContainerPort{{Name: "raw", ContainerPort: 1}}
	if p := builders.MakePod("shop", "p").ContainerPort("http", 80).ContainerPorts(ports...).Obj(); !reflect.DeepEqual(p.Spec.Containers[0].Ports, ports) {
		t.Fatalf("ContainerPorts must replace: %+v", p.Spec.Containers[0].Ports)
	}
}

func TestMakeNode(t *testing.T) {
	got := builders.MakeNode("n1").Zone("zone-a").Label("node-role.kubernetes.io/control-plane", "").CPU("500m").Ready(true).Obj()
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
			corev1.LabelTopologyZone: "zone-a", "node-role.kubernetes.io/control-plane": ""}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	unzoned := builders.MakeNode("n2").Zone("zone-a").Zone("").Ready(false).Obj()
	if _, ok := unzoned.Labels[corev1.LabelTopologyZone]; ok || unzoned.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Fatalf("Zone(\"\") must unzone and Ready(false) must say False: %+v", unzoned)
	}
}

func TestMakeEndpointSlice(t *testing.T) {
	owner := metav1.OwnerReference{Kind: "Service", Name: "web", UID: "svc"}
	ep := builders.MakeEndpoint("10.0.0.1").Ready().Node("n").Zone("z").Hostname("h").ZoneHints("z").TargetPod("shop", "web-0", "p0").Obj()
	got := builders.MakeEndpointSlice("shop", "web-abc").Service("web").ManagedBy("me").Annotation("a", "b").
		AddressType(discoveryv1.AddressTypeIPv6).Port("http", 8080).Ports(discoveryv1.EndpointPort{Port: ptr.To[int32](9)}).
		Endpoints(ep).Owner(owner).UID("s").Obj()
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-abc", UID: "s",
			Labels:          map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "me"},
			Annotations:     map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{owner}},
		AddressType: discoveryv1.AddressTypeIPv6,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)},
			{Port: ptr.To[int32](9)},
		},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To("n"), Zone: ptr.To("z"), Hostname: ptr.To("h"),
			Hints:     &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z"}}},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0", UID: "p0"},
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	if bare := builders.MakeEndpointSlice("shop", "s").Obj(); bare.AddressType != discoveryv1.AddressTypeIPv4 || bare.Labels != nil {
		t.Fatalf("MakeEndpointSlice defaults only the IPv4 address type: %+v", bare)
	}
	if c := builders.MakeEndpoint("10.0.0.1").Obj().Conditions; c.Ready != nil || c.Serving != nil || c.Terminating != nil {
		t.Fatalf("MakeEndpoint must leave the conditions unset: %+v", c)
	}
}

func TestMakeImportedSlice(t *testing.T) {
	got := builders.MakeImportedSlice("shop", "web-east", "web", "east").DerivedService("derived-web").Obj()
	want := map[string]string{
		mcsv1beta1.LabelServiceName:   "web",
		mcsv1beta1.LabelSourceCluster: "east",
		discoveryv1.LabelManagedBy:    sliceplan.ManagedBy,
		discoveryv1.LabelServiceName:  "derived-web",
	}
	if !reflect.DeepEqual(got.Labels, want) || got.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Fatalf("labels %v, want %v (address type %s)", got.Labels, want, got.AddressType)
	}
	if s := builders.MakeImportedSlice("shop", "x", "", "east").Obj(); len(s.Labels) != 2 {
		t.Fatalf("no service, no service label: %v", s.Labels)
	}
}

// The builder repeats the import controller's managed-by value so that it imports no fleetslice
// package; this keeps the copy honest.
func TestImportManagedByIsSliceplans(t *testing.T) {
	if builders.ImportManagedBy != sliceplan.ManagedBy {
		t.Fatalf("ImportManagedBy = %q, sliceplan.ManagedBy = %q", builders.ImportManagedBy, sliceplan.ManagedBy)
	}
}

func TestMakeServiceExportAndImport(t *testing.T) {
	e := builders.MakeServiceExport("shop", "web").Label("l", "v").Annotation("a", "b").Obj()
	if e.Namespace != "shop" || e.Name != "web" || e.Labels["l"] != "v" || e.Annotations["a"] != "b" {
		t.Fatalf("export: %+v", e)
	}
	got := builders.MakeServiceImport("shop", "web").IPs("10.0.0.99").Port("http", corev1.ProtocolTCP, 80).Obj()
	want := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.0.0.99"},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
	if h := builders.MakeServiceImport("shop", "web").Headless().Obj(); h.Spec.Type != mcsv1beta1.Headless {
		t.Fatalf("headless: %s", h.Spec.Type)
	}
	if h := builders.MakeServiceImport("shop", "web").Type(mcsv1beta1.Headless).Obj(); h.Spec.Type != mcsv1beta1.Headless {
		t.Fatalf("type: %s", h.Spec.Type)
	}
}
