package records

import (
	"net/netip"
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

func headlessImport(name string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, IPs: []string{"10.0.0.99"}},
	}
}

func endpoint(hostname string, addresses ...string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: addresses}
	if hostname != "" {
		e.Hostname = ptr.To(hostname)
	}
	return e
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
	got := Build(imp, []*discoveryv1.EndpointSlice{importedSlice("web", "east", endpoint("", "10.1.0.1"))})
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
	if names := got.AddressNames("demo", "web"); !slices.Equal(names, []AddressName{{addrs("10.0.0.10")[0], "web.demo.svc"}, {addrs("fd00::1")[0], "web.demo.svc"}}) {
		t.Errorf("address names %v", names)
	}
}

func TestBuildHeadless(t *testing.T) {
	other := importedSlice("web", "east", endpoint("", "10.9.9.9"))
	unlabelled := importedSlice("db", "", endpoint("", "10.8.8.8"))
	emptyPart := importedSlice("db", "a..b", endpoint("", "10.8.8.9"))
	notReady := endpoint("", "10.2.0.6")
	notReady.Conditions.Ready = ptr.To(false)
	ready := endpoint("", "10.1.0.5")
	ready.Conditions.Ready = ptr.To(true)
	got := Build(headlessImport("db"), []*discoveryv1.EndpointSlice{
		importedSlice("db", "West", endpoint("DB-0", "10.2.0.5"), notReady),
		importedSlice("db", "east", ready, endpoint("", "garbage")),
		other, unlabelled, emptyPart, nil,
	})
	if !got.Headless || len(got.IPs) != 0 || !got.Exists() {
		t.Fatalf("a headless import with endpoints exists and has no clusterset IPs, got %+v", got)
	}
	// Unnamed ports are kept: the SRV records at the Service name carry them.
	ports := []Port{{Name: "pg", Protocol: "tcp", Port: 5432}, {Protocol: "tcp", Port: 9}}
	want := []Endpoint{
		{Cluster: "east", Hostname: "10-1-0-5", Addrs: addrs("10.1.0.5"), Ports: ports},
		{Cluster: "west", Hostname: "db-0", Addrs: addrs("10.2.0.5"), Ports: ports},
	}
	checkEndpoints(t, got.Endpoints, want)
	if empty := Build(headlessImport("db"), nil); empty.Exists() {
		t.Error("a headless import without ready endpoints exists")
	}
}

func checkEndpoints(t *testing.T, got, want []Endpoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("endpoints %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Cluster != w.Cluster || g.Hostname != w.Hostname || !slices.Equal(g.Addrs, w.Addrs) || (w.Ports != nil && !slices.Equal(g.Ports, w.Ports)) {
			t.Errorf("endpoint %d: %+v, want %+v", i, g, w)
		}
	}
}

func TestAddressLabel(t *testing.T) {
	for addr, want := range map[string]string{
		"10.1.0.6":             "10-1-0-6",
		"fd00::6":              "fd00--6",
		"FD00:0::6":            "fd00--6",
		"fd00::":               "fd00--0",
		"::1":                  "--1",
		"fe80::1%eth0":         "fe80--1",
		"2001:db8:1:2:3:4:5:6": "2001-db8-1-2-3-4-5-6",
	} {
		if got := AddressLabel(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
		if !isLabel(AddressLabel(netip.MustParseAddr(addr))) && addr != "::1" {
			t.Errorf("%s: %q is not a DNS label", addr, AddressLabel(netip.MustParseAddr(addr)))
		}
	}
}

// TestBuildNamesEndpointsUniquely: every endpoint has a name unique in its cluster and Service,
// the same whatever order the slices come in; a hostname from the slice keeps its name.
func TestBuildNamesEndpointsUniquely(t *testing.T) {
	slicesIn := []*discoveryv1.EndpointSlice{
		importedSlice("db", "east",
			endpoint("", "10.1.0.6"),
			endpoint("10-1-0-6", "10.1.0.99"),    // a real hostname that is 10.1.0.6's identifier
			endpoint("10-1-0-6-x2", "10.1.0.98"), // and the first way out of it
			endpoint("", "10.1.0.7", "10.1.0.77"),
			endpoint("not_a_label", "10.1.0.8"), // not a DNS label: named as if absent
			endpoint("", "10.1.0.7"),            // the same endpoint in a second copy
		),
		importedSlice("db", "west", endpoint("", "10.1.0.6")), // same id, other cluster: no clash
	}
	slicesIn[0].Endpoints = append(slicesIn[0].Endpoints, endpoint("", "fd00::6"))
	want := []Endpoint{
		{Cluster: "east", Hostname: "10-1-0-6", Addrs: addrs("10.1.0.99")},
		{Cluster: "east", Hostname: "10-1-0-6-x2", Addrs: addrs("10.1.0.98")},
		{Cluster: "east", Hostname: "10-1-0-6-x3", Addrs: addrs("10.1.0.6")},
		{Cluster: "east", Hostname: "10-1-0-7", Addrs: addrs("10.1.0.7")},
		{Cluster: "east", Hostname: "10-1-0-7", Addrs: addrs("10.1.0.7", "10.1.0.77")},
		{Cluster: "east", Hostname: "10-1-0-8", Addrs: addrs("10.1.0.8")},
		{Cluster: "east", Hostname: "fd00--6", Addrs: addrs("fd00::6")},
		{Cluster: "west", Hostname: "10-1-0-6", Addrs: addrs("10.1.0.6")},
	}
	checkEndpoints(t, Build(headlessImport("db"), slicesIn).Endpoints, want)
	reversed := slices.Clone(slicesIn)
	slices.Reverse(reversed)
	reversed[1] = reversed[1].DeepCopy()
	slices.Reverse(reversed[1].Endpoints)
	checkEndpoints(t, Build(headlessImport("db"), reversed).Endpoints, want)
}
