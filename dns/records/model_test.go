package records

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func importedSlice(service, cluster string, endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: service + "-" + cluster, Labels: map[string]string{
			mcsv1beta1.LabelServiceName: service, mcsv1beta1.LabelSourceCluster: cluster,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("PG"), Port: ptr.To[int32](5432)}, {Port: ptr.To[int32](9)}},
		Endpoints:   endpoints,
	}
}

func TestBuildClusterSetIP(t *testing.T) {
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type: mcsv1beta1.ClusterSetIP,
			IPs:  []string{"10.0.0.10", "not-an-ip", "::ffff:10.0.0.10", "fd00::1"},
			Ports: []mcsv1beta1.ServicePort{
				{Name: "HTTP", Protocol: corev1.ProtocolTCP, Port: 80},
				{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
				{Name: "bad", Port: 70000},
			},
		},
	}
	got := Build(imp, []*discoveryv1.EndpointSlice{importedSlice("web", "east", discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}})})
	if got.Headless || len(got.Endpoints) != 0 {
		t.Fatalf("a ClusterSetIP import resolves to its IPs only, got %+v", got)
	}
	if !slices.Equal(got.IPs, addrs("10.0.0.10", "fd00::1")) {
		t.Errorf("IPs %v: want parsed, unmapped and distinct", got.IPs)
	}
	want := []Port{{Name: "http", Protocol: "tcp", Port: 80}, {Name: "dns", Protocol: "udp", Port: 53}}
	if !slices.Equal(got.Ports, want) {
		t.Errorf("ports %v, want %v", got.Ports, want)
	}
}

func TestBuildHeadless(t *testing.T) {
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "db"},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, IPs: []string{"10.0.0.99"}},
	}
	other := importedSlice("web", "east", discoveryv1.Endpoint{Addresses: []string{"10.9.9.9"}})
	unlabelled := importedSlice("db", "", discoveryv1.Endpoint{Addresses: []string{"10.8.8.8"}})
	got := Build(imp, []*discoveryv1.EndpointSlice{
		importedSlice("db", "West",
			discoveryv1.Endpoint{Addresses: []string{"10.2.0.5"}, Hostname: ptr.To("DB-0")},
			discoveryv1.Endpoint{Addresses: []string{"10.2.0.6"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		),
		importedSlice("db", "east",
			discoveryv1.Endpoint{Addresses: []string{"10.1.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			discoveryv1.Endpoint{Addresses: []string{"garbage"}},
		),
		other, unlabelled, nil,
	})
	if !got.Headless || len(got.IPs) != 0 {
		t.Fatalf("a headless import has no clusterset IPs, got %+v", got)
	}
	pg := []Port{{Name: "pg", Protocol: "tcp", Port: 5432}}
	want := []Endpoint{
		{Cluster: "east", Addrs: addrs("10.1.0.5"), Ports: pg},
		{Cluster: "west", Hostname: "db-0", Addrs: addrs("10.2.0.5"), Ports: pg},
	}
	if len(got.Endpoints) != len(want) {
		t.Fatalf("endpoints %+v, want %+v", got.Endpoints, want)
	}
	for i := range want {
		g, w := got.Endpoints[i], want[i]
		if g.Cluster != w.Cluster || g.Hostname != w.Hostname || !slices.Equal(g.Addrs, w.Addrs) || !slices.Equal(g.Ports, w.Ports) {
			t.Errorf("endpoint %d: %+v, want %+v", i, g, w)
		}
	}
}
