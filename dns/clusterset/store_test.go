package clusterset

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func serviceImport(ns, name string, typ mcsv1beta1.ServiceImportType, ips ...string) *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: typ, IPs: ips},
	}
}

func slice(ns, name, service, cluster string, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{mcsv1beta1.LabelServiceName: service, mcsv1beta1.LabelSourceCluster: cluster}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return s
}

func headlessAddrs(t *testing.T, s *Store, ns, name string) []string {
	t.Helper()
	svc, ok := s.Service(ns, name)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range svc.Endpoints {
		for _, a := range e.Addrs {
			out = append(out, a.String())
		}
	}
	slices.Sort(out)
	return out
}

func TestStoreFollowsEvents(t *testing.T) {
	s := NewStore()
	s.setSlice(slice("demo", "db-east", "db", "east", "10.1.0.5"))
	if _, ok := s.Service("demo", "db"); ok || s.Namespace("demo") {
		t.Fatal("slices without their ServiceImport must not resolve")
	}
	s.setImport(serviceImport("demo", "db", mcsv1beta1.Headless))
	s.setSlice(slice("demo", "db-west", "db", "west", "10.2.0.5"))
	if got := headlessAddrs(t, s, "demo", "db"); !slices.Equal(got, []string{"10.1.0.5", "10.2.0.5"}) {
		t.Fatalf("headless endpoints %v", got)
	}
	if !s.Namespace("demo") {
		t.Fatal("namespace with an import not known")
	}

	serial := s.Serial()
	// A slice relabelled to another Service leaves the first one.
	s.setImport(serviceImport("demo", "cache", mcsv1beta1.Headless))
	s.setSlice(slice("demo", "db-west", "cache", "west", "10.2.0.5"))
	if got := headlessAddrs(t, s, "demo", "db"); !slices.Equal(got, []string{"10.1.0.5"}) {
		t.Fatalf("db after relabel %v", got)
	}
	if got := headlessAddrs(t, s, "demo", "cache"); !slices.Equal(got, []string{"10.2.0.5"}) {
		t.Fatalf("cache after relabel %v", got)
	}
	if s.Serial() <= serial {
		t.Fatalf("serial %d did not move past %d", s.Serial(), serial)
	}

	// A delete seen only as a tombstone still removes.
	s.deleteSlice(toolscache.DeletedFinalStateUnknown{Key: "demo/db-east", Obj: slice("demo", "db-east", "db", "east")})
	if got := headlessAddrs(t, s, "demo", "db"); len(got) != 0 {
		t.Fatalf("db after its slice went %v", got)
	}
	s.setImport(serviceImport("demo", "db", mcsv1beta1.ClusterSetIP, "10.0.0.9"))
	if svc, ok := s.Service("demo", "db"); !ok || svc.Headless || !slices.Equal(svc.IPs, []netip.Addr{netip.MustParseAddr("10.0.0.9")}) {
		t.Fatalf("db after becoming ClusterSetIP: %+v", svc)
	}
	s.deleteImport(serviceImport("demo", "db", mcsv1beta1.ClusterSetIP))
	s.deleteImport(toolscache.DeletedFinalStateUnknown{Obj: serviceImport("demo", "cache", mcsv1beta1.Headless)})
	if _, ok := s.Service("demo", "db"); ok || s.Namespace("demo") {
		t.Fatal("deleted imports still resolve")
	}
	// Objects of other kinds are ignored, not a crash.
	s.setImport("not an import")
	s.setSlice(42)
}

// fillStore imports n ClusterSetIP Services spread over 10 namespaces.
func fillStore(n int) *Store {
	s := NewStore()
	for i := range n {
		s.setImport(serviceImport(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("svc-%d", i), mcsv1beta1.ClusterSetIP,
			fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)))
	}
	s.synced.Store(true)
	return s
}

// TestStoreIndexesAddresses: the reverse index follows the Services it comes from, through
// changes, relabels and deletes, and finds addresses by prefix after each change.
func TestStoreIndexesAddresses(t *testing.T) {
	s := NewStore()
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	check := func(step string, addr netip.Addr, want ...string) {
		t.Helper()
		got := s.AddressNames(addr)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v has names %q, want %q", step, addr, got, want)
		}
	}
	s.setImport(serviceImport("demo", "web", mcsv1beta1.ClusterSetIP, "10.0.0.10", "fd00:10::10"))
	s.setImport(serviceImport("demo", "db", mcsv1beta1.Headless))
	s.setSlice(slice("demo", "db-east", "db", "east", "10.1.0.5", "10.1.0.6"))
	s.setImport(serviceImport("shop", "cache", mcsv1beta1.Headless))
	s.setSlice(slice("shop", "cache-east", "cache", "east", "10.1.0.5"))
	check("start", a("10.0.0.10"), "web.demo.svc")
	check("start", a("fd00:10::10"), "web.demo.svc")
	check("start", a("10.1.0.5"), "10-1-0-5.east.cache.shop.svc", "10-1-0-5.east.db.demo.svc")
	if !s.HasAddressIn(p("10.1.0.0/24")) || !s.HasAddressIn(p("fd00::/8")) || s.HasAddressIn(p("10.2.0.0/16")) || s.HasAddressIn(p("fe80::/10")) {
		t.Fatal("prefix search wrong at start")
	}

	s.setSlice(slice("demo", "db-east", "db", "east", "10.1.0.6"))
	check("endpoint gone", a("10.1.0.5"), "10-1-0-5.east.cache.shop.svc")
	s.setImport(serviceImport("demo", "web", mcsv1beta1.ClusterSetIP, "10.0.0.20"))
	check("ip changed", a("10.0.0.10"))
	check("ip changed", a("10.0.0.20"), "web.demo.svc")
	if !s.HasAddressIn(p("10.0.0.20/32")) || s.HasAddressIn(p("fd00::/8")) {
		t.Fatal("prefix search not rebuilt after a change")
	}
	s.deleteImport(serviceImport("shop", "cache", mcsv1beta1.Headless))
	s.deleteSlice(slice("demo", "db-east", "db", "east"))
	check("deleted", a("10.1.0.5"))
	check("deleted", a("10.1.0.6"))
	if s.HasAddressIn(p("10.1.0.0/16")) || len(s.addressNames) != 1 {
		t.Fatalf("index after deletes: %v", s.addressNames)
	}
}
