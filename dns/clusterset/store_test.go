package clusterset

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

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
	s.setSlice(builders.MakeImportedSlice("demo", "db-east", "db", "east").Endpoints(builders.MakeEndpoint("10.1.0.5").Obj()).Obj())
	if _, ok := s.Service("demo", "db"); ok || s.Namespace("demo") {
		t.Fatal("slices without their ServiceImport must not resolve")
	}
	s.setImport(builders.MakeServiceImport("demo", "db").Headless().Obj())
	s.setSlice(builders.MakeImportedSlice("demo", "db-west", "db", "west").Endpoints(builders.MakeEndpoint("10.2.0.5").Obj()).Obj())
	if got := headlessAddrs(t, s, "demo", "db"); !slices.Equal(got, []string{"10.1.0.5", "10.2.0.5"}) {
		t.Fatalf("headless endpoints %v", got)
	}
	if !s.Namespace("demo") {
		t.Fatal("namespace with an import not known")
	}

	serial := s.Serial()
	// A slice relabelled to another Service leaves the first one.
	s.setImport(builders.MakeServiceImport("demo", "cache").Headless().Obj())
	s.setSlice(builders.MakeImportedSlice("demo", "db-west", "cache", "west").Endpoints(builders.MakeEndpoint("10.2.0.5").Obj()).Obj())
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
	s.deleteSlice(toolscache.DeletedFinalStateUnknown{Key: "demo/db-east", Obj: builders.MakeImportedSlice("demo", "db-east", "db", "east").Obj()})
	if got := headlessAddrs(t, s, "demo", "db"); len(got) != 0 {
		t.Fatalf("db after its slice went %v", got)
	}
	s.setImport(builders.MakeServiceImport("demo", "db").IPs("10.0.0.9").Obj())
	if svc, ok := s.Service("demo", "db"); !ok || svc.Headless || !slices.Equal(svc.IPs, []netip.Addr{netip.MustParseAddr("10.0.0.9")}) {
		t.Fatalf("db after becoming ClusterSetIP: %+v", svc)
	}
	s.deleteImport(builders.MakeServiceImport("demo", "db").Obj())
	s.deleteImport(toolscache.DeletedFinalStateUnknown{Obj: builders.MakeServiceImport("demo", "cache").Headless().Obj()})
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
		s.setImport(builders.MakeServiceImport(fmt.Sprintf("ns-%d", i%10), fmt.Sprintf("svc-%d", i)).IPs(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)).Obj())
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
	s.setImport(builders.MakeServiceImport("demo", "web").IPs("10.0.0.10", "fd00:10::10").Obj())
	s.setImport(builders.MakeServiceImport("demo", "db").Headless().Obj())
	s.setSlice(builders.MakeImportedSlice("demo", "db-east", "db", "east").Endpoints(builders.MakeEndpoint("10.1.0.5").Obj(), builders.MakeEndpoint("10.1.0.6").Obj()).Obj())
	s.setImport(builders.MakeServiceImport("shop", "cache").Headless().Obj())
	s.setSlice(builders.MakeImportedSlice("shop", "cache-east", "cache", "east").Endpoints(builders.MakeEndpoint("10.1.0.5").Obj()).Obj())
	check("start", a("10.0.0.10"), "web.demo.svc")
	check("start", a("fd00:10::10"), "web.demo.svc")
	check("start", a("10.1.0.5"), "10-1-0-5.east.cache.shop.svc", "10-1-0-5.east.db.demo.svc")
	if !s.HasAddressIn(p("10.1.0.0/24")) || !s.HasAddressIn(p("fd00::/8")) || s.HasAddressIn(p("10.2.0.0/16")) || s.HasAddressIn(p("fe80::/10")) {
		t.Fatal("prefix search wrong at start")
	}

	s.setSlice(builders.MakeImportedSlice("demo", "db-east", "db", "east").Endpoints(builders.MakeEndpoint("10.1.0.6").Obj()).Obj())
	check("endpoint gone", a("10.1.0.5"), "10-1-0-5.east.cache.shop.svc")
	s.setImport(builders.MakeServiceImport("demo", "web").IPs("10.0.0.20").Obj())
	check("ip changed", a("10.0.0.10"))
	check("ip changed", a("10.0.0.20"), "web.demo.svc")
	if !s.HasAddressIn(p("10.0.0.20/32")) || s.HasAddressIn(p("fd00::/8")) {
		t.Fatal("prefix search not rebuilt after a change")
	}
	s.deleteImport(builders.MakeServiceImport("shop", "cache").Headless().Obj())
	s.deleteSlice(builders.MakeImportedSlice("demo", "db-east", "db", "east").Obj())
	check("deleted", a("10.1.0.5"))
	check("deleted", a("10.1.0.6"))
	if s.HasAddressIn(p("10.1.0.0/16")) || len(s.addressNames) != 1 {
		t.Fatalf("index after deletes: %v", s.addressNames)
	}
}
