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

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// pgPorts are the ports of every imported slice here: a named one and an unnamed one, neither
// with a protocol, which the records must read as TCP.
var pgPorts = []discoveryv1.EndpointPort{{Name: ptr.To("PG"), Port: ptr.To[int32](5432)}, {Port: ptr.To[int32](9)}}

func headlessImport(name string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, IPs: []string{"10.0.0.99"}},
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
	got := Build(imp, []*discoveryv1.EndpointSlice{builders.MakeImportedSlice("demo", "web-east", "web", "east").Ports(pgPorts...).Endpoints(builders.MakeEndpoint("10.1.0.1").Obj()).Obj()})
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
	other := builders.MakeImportedSlice("demo", "web-east", "web", "east").Ports(pgPorts...).Endpoints(builders.MakeEndpoint("10.9.9.9").Obj()).Obj()
	unlabelled := builders.MakeImportedSlice("demo", "db-", "db", "").Ports(pgPorts...).Endpoints(builders.MakeEndpoint("10.8.8.8").Obj()).Obj()
	emptyPart := builders.MakeImportedSlice("demo", "db-a..b", "db", "a..b").Ports(pgPorts...).Endpoints(builders.MakeEndpoint("10.8.8.9").Obj()).Obj()
	notReady := builders.MakeEndpoint("10.2.0.6").Obj()
	notReady.Conditions.Ready = ptr.To(false)
	ready := builders.MakeEndpoint("10.1.0.5").Obj()
	ready.Conditions.Ready = ptr.To(true)
	got := Build(headlessImport("db"), []*discoveryv1.EndpointSlice{
		builders.MakeImportedSlice("demo", "db-West", "db", "West").Ports(pgPorts...).Endpoints(builders.MakeEndpoint("10.2.0.5").Hostname("DB-0").Obj(), notReady).Obj(),
		builders.MakeImportedSlice("demo", "db-east", "db", "east").Ports(pgPorts...).Endpoints(ready, builders.MakeEndpoint("garbage").Obj()).Obj(),
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
		builders.MakeImportedSlice("demo", "db-east", "db", "east").Ports(pgPorts...).Endpoints(
			builders.MakeEndpoint("10.1.0.6").Obj(),
			builders.MakeEndpoint("10.1.0.99").Hostname("10-1-0-6").Obj(),    // a real hostname that is 10.1.0.6's identifier
			builders.MakeEndpoint("10.1.0.98").Hostname("10-1-0-6-x2").Obj(), // and the first way out of it
			builders.MakeEndpoint("10.1.0.7", "10.1.0.77").Obj(),
			builders.MakeEndpoint("10.1.0.8").Hostname("not_a_label").Obj(), // not a DNS label: named as if absent
			builders.MakeEndpoint("10.1.0.7").Obj(),                         // the same endpoint in a second copy
		).Obj(),
		builders.MakeImportedSlice("demo", "db-west", "db", "west").Ports(pgPorts...).Endpoints(builders.MakeEndpoint("10.1.0.6").Obj()).Obj(), // same id, other cluster: no clash
	}
	slicesIn[0].Endpoints = append(slicesIn[0].Endpoints, builders.MakeEndpoint("fd00::6").Obj())
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
