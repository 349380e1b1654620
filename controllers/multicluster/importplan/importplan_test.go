package importplan

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

var owner = metav1.OwnerReference{APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceImport", Name: "web", UID: "uid", Controller: ptr.To(true)}

func TestFamilyAttempts(t *testing.T) {
	if got := FamilyAttempts(nil); len(got) != 1 || got[0].Policy != nil || got[0].Families != nil {
		t.Fatalf("no families: %+v", got)
	}
	single := FamilyAttempts([]corev1.IPFamily{corev1.IPv6Protocol})
	if len(single) != 1 || *single[0].Policy != corev1.IPFamilyPolicySingleStack || single[0].Families[0] != corev1.IPv6Protocol {
		t.Fatalf("one family: %+v", single)
	}
	dual := FamilyAttempts([]corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol})
	if len(dual) != 3 || *dual[0].Policy != corev1.IPFamilyPolicyPreferDualStack || len(dual[0].Families) != 2 ||
		dual[1].Families[0] != corev1.IPv6Protocol || dual[2].Families[0] != corev1.IPv4Protocol {
		t.Fatalf("two families: %+v", dual)
	}
}

func importSpec() mcsv1beta1.ServiceImportSpec {
	return mcsv1beta1.ServiceImportSpec{
		Type:                  mcsv1beta1.ClusterSetIP,
		Ports:                 []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}},
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
		TrafficDistribution:   ptr.To(corev1.ServiceTrafficDistributionPreferClose),
		IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol},
	}
}

func TestDerivedServiceAndUpdate(t *testing.T) {
	spec := importSpec()
	svc := DerivedService("shop", "web", spec, FamilyAttempts(spec.IPFamilies)[0])
	if svc.Name != names.DerivedServiceName("shop", "web") || svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Selector != nil {
		t.Fatalf("derived Service %+v", svc)
	}
	if *svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != defaultAffinityTimeout {
		t.Fatal("ClientIP affinity without a config must carry the API default timeout")
	}
	if *svc.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal || *svc.Spec.TrafficDistribution != corev1.ServiceTrafficDistributionPreferClose {
		t.Fatal("traffic policy and distribution must follow the import")
	}
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].TargetPort.IntVal != 53 || svc.Spec.Ports[1].Protocol != corev1.ProtocolUDP {
		t.Fatalf("ports %+v", svc.Spec.Ports)
	}
	// As the API server would store it: IPs allocated, defaults filled.
	stored := svc.DeepCopy()
	stored.Spec.ClusterIP, stored.Spec.ClusterIPs = "10.0.0.7", []string{"10.0.0.7"}
	if UpdateDerived(stored, "web", spec) {
		t.Fatal("an up-to-date derived Service must not be rewritten")
	}
	spec.SessionAffinity = corev1.ServiceAffinityNone
	spec.Ports = spec.Ports[:1]
	spec.TrafficDistribution = nil
	if !UpdateDerived(stored, "web", spec) {
		t.Fatal("a changed import must update the derived Service")
	}
	if stored.Spec.SessionAffinityConfig != nil || len(stored.Spec.Ports) != 1 || stored.Spec.TrafficDistribution != nil || stored.Spec.ClusterIP != "10.0.0.7" {
		t.Fatalf("updated spec %+v", stored.Spec)
	}
	if UpdateDerived(stored, "web", spec) {
		t.Fatal("updating twice must be a no-op")
	}
}

func TestDerivedServiceIsBoundByNameNotOwner(t *testing.T) {
	spec := importSpec()
	svc := DerivedService("shop", "web", spec, FamilyAttempt{})
	if len(svc.OwnerReferences) != 0 {
		t.Fatalf("a new derived Service names owners %+v; it must be creatable before its ServiceImport", svc.OwnerReferences)
	}
	if name, ok := names.ImportOfDerived(svc.Namespace, svc.Name, svc.Labels[mcsv1beta1.LabelServiceName]); !ok || name != "web" {
		t.Fatalf("the derived Service binds to %q, %v; want web", name, ok)
	}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm"}
	svc.OwnerReferences = []metav1.OwnerReference{owner, other}
	if !UpdateDerived(svc, "web", spec) {
		t.Fatal("a derived Service still owned by its ServiceImport must be updated")
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0] != other {
		t.Fatalf("owner references %+v: want only the ServiceImport's gone", svc.OwnerReferences)
	}
	svc.OwnerReferences = []metav1.OwnerReference{owner}
	if !UpdateDerived(svc, "web", spec) || svc.OwnerReferences != nil {
		t.Fatalf("owner references %+v after dropping the last one, want none", svc.OwnerReferences)
	}
	if UpdateDerived(svc, "web", spec) {
		t.Fatal("updating twice must be a no-op")
	}
}

func TestNeedsRecreate(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	tests := []struct {
		have, want []corev1.IPFamily
		recreate   bool
	}{
		{[]corev1.IPFamily{v4}, []corev1.IPFamily{v4}, false},
		{[]corev1.IPFamily{v4}, []corev1.IPFamily{v4, v6}, false},
		{[]corev1.IPFamily{v6}, []corev1.IPFamily{v4, v6}, false}, // a v6-only cluster keeps its v6 Service
		{[]corev1.IPFamily{v6, v4}, []corev1.IPFamily{v4, v6}, true},
		{[]corev1.IPFamily{v4, v6}, []corev1.IPFamily{v4}, true},
		{[]corev1.IPFamily{v4}, []corev1.IPFamily{v6}, true},
		{nil, []corev1.IPFamily{v6}, false},
	}
	for _, tc := range tests {
		got := NeedsRecreate(&corev1.Service{Spec: corev1.ServiceSpec{IPFamilies: tc.have}}, tc.want)
		if got != tc.recreate {
			t.Errorf("have %v want %v: recreate=%v", tc.have, tc.want, got)
		}
	}
}

func TestClusterSetIPs(t *testing.T) {
	if ClusterSetIPs(nil) != nil {
		t.Fatal("nil")
	}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1", ClusterIPs: []string{"10.0.0.1", "fd00::1"}}}
	if got := ClusterSetIPs(svc); len(got) != 2 || got[1] != "fd00::1" {
		t.Fatalf("%v", got)
	}
	if got := ClusterSetIPs(&corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}); got != nil {
		t.Fatalf("headless gives %v", got)
	}
}

func TestReadyAndStatus(t *testing.T) {
	tests := []struct {
		in     Readiness
		status metav1.ConditionStatus
		reason mcsv1beta1.ServiceImportConditionReason
	}{
		{Readiness{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.0.0.1"}, LiveClusters: 2}, metav1.ConditionTrue, mcsv1beta1.ServiceImportReasonReady},
		{Readiness{Type: mcsv1beta1.ClusterSetIP, LiveClusters: 2}, metav1.ConditionFalse, mcsv1beta1.ServiceImportReasonPending},
		{Readiness{Type: mcsv1beta1.ClusterSetIP, FamilyProblem: "IPv6"}, metav1.ConditionFalse, mcsv1beta1.ServiceImportReasonIPFamilyNotSupported},
		{Readiness{Type: mcsv1beta1.Headless, LiveClusters: 1}, metav1.ConditionTrue, mcsv1beta1.ServiceImportReasonReady},
		{Readiness{Type: mcsv1beta1.Headless, ServiceProblem: "boom"}, metav1.ConditionFalse, mcsv1beta1.ServiceImportReasonPending},
	}
	for i, tc := range tests {
		c := ReadyCondition(tc.in, 3)
		if c.Status != tc.status || c.Reason != string(tc.reason) || c.ObservedGeneration != 3 {
			t.Errorf("case %d: %+v", i, c)
		}
	}
	ready := ReadyCondition(Readiness{Type: mcsv1beta1.Headless, LiveClusters: 2}, 1)
	status, changed := Status(mcsv1beta1.ServiceImportStatus{}, []string{"a", "b"}, true, ready)
	if !changed || len(status.Clusters) != 2 || status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsPresent {
		t.Fatalf("status %+v changed=%v", status, changed)
	}
	if _, again := Status(status, []string{"a", "b"}, true, ready); again {
		t.Fatal("the same inputs must not change the status")
	}
	withdrawn, changed := Status(status, []string{"a"}, false, ready)
	if !changed || len(withdrawn.Clusters) != 1 || withdrawn.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsAbsent {
		t.Fatalf("withdrawn %+v", withdrawn)
	}
}

func TestSpec(t *testing.T) {
	merged := importSpec()
	got := Spec(merged, []string{"10.0.0.1"})
	if len(got.IPs) != 1 || &got.Ports[0] == &merged.Ports[0] {
		t.Fatalf("spec %+v", got)
	}
	merged.Type = mcsv1beta1.Headless
	if Spec(merged, []string{"10.0.0.1"}).IPs != nil {
		t.Fatal("a headless import has no IPs")
	}
	if Spec(mcsv1beta1.ServiceImportSpec{}, nil).Ports == nil {
		t.Fatal("ports must be present for the schema")
	}
}

// FuzzUpdateDerived: after UpdateDerived, the managed fields match what a fresh derived
// Service would have, and a second update is a no-op.
func FuzzUpdateDerived(f *testing.F) {
	f.Add(uint8(2), true, int32(30), "Local", "PreferClose")
	f.Add(uint8(0), false, int32(0), "", "")
	f.Fuzz(func(t *testing.T, ports uint8, clientIP bool, timeout int32, policy, distribution string) {
		spec := mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP}
		for i := range int(ports % 8) {
			spec.Ports = append(spec.Ports, mcsv1beta1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(1000 + i)})
		}
		if clientIP {
			spec.SessionAffinity = corev1.ServiceAffinityClientIP
			if timeout != 0 {
				spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
			}
		}
		if policy != "" {
			spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicy(policy))
		}
		if distribution != "" {
			spec.TrafficDistribution = ptr.To(distribution)
		}
		fresh := DerivedService("ns", "web", spec, FamilyAttempt{})
		existing := &corev1.Service{}
		UpdateDerived(existing, "web", spec)
		if UpdateDerived(existing, "web", spec) {
			t.Fatal("second update changed something")
		}
		if UpdateDerived(fresh, "web", spec) {
			t.Fatal("a fresh derived Service is not up to date")
		}
	})
}

func BenchmarkUpdateDerivedUnchanged(b *testing.B) {
	spec := importSpec()
	svc := DerivedService("shop", "web", spec, FamilyAttempt{})
	b.ReportAllocs()
	for b.Loop() {
		if UpdateDerived(svc, "web", spec) {
			b.Fatal("changed")
		}
	}
}
