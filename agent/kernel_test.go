package agent

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

func TestKernelDataplaneOpensUntilItWorks(t *testing.T) {
	fakes := map[knftables.Family]*knftables.Fake{}
	fails := 2
	open := func(f knftables.Family) (knftables.Interface, error) {
		if fails > 0 {
			fails--
			return nil, errors.New("nft: command not found")
		}
		fakes[f] = knftables.NewFake(f, dataplane.TableName)
		return fakes[f], nil
	}
	dp := NewKernelDataplane(dataplane.Options{Family: knftables.IPv6Family}, open)
	services := []dataplane.Service{webService(httpPort(dpEps()))}
	services[0].ClusterIPs = addrs("fd00::10")
	for range 2 {
		if _, err := dp.Sync(t.Context(), services, false); err == nil || !strings.Contains(err.Error(), "nftables package") {
			t.Fatalf("Sync while nft is missing: %v, want an error that says what to install", err)
		}
	}
	stats, err := dp.Sync(t.Context(), services, false)
	if err != nil || !stats.Full || stats.Services != 1 {
		t.Fatalf("Sync once nft works: %+v, %v; want a full sync of 1 Service", stats, err)
	}
	if !strings.Contains(fakes[knftables.IPv6Family].Dump(), "fd00::10 . tcp . 80") {
		t.Fatalf("ip6 table lacks the Service:\n%s", fakes[knftables.IPv6Family].Dump())
	}
}

func TestDeleteTablesRemovesTheTable(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, dataplane.TableName)
	s, err := dataplane.New(fake, dataplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sync(t.Context(), []dataplane.Service{webService(httpPort(dpEps("10.1.0.1:8080")))}, true); err != nil {
		t.Fatal(err)
	}
	open := func(knftables.Family) (knftables.Interface, error) { return fake, nil }
	if err := DeleteTables(t.Context(), open, knftables.IPv4Family); err != nil {
		t.Fatal(err)
	}
	if dump := fake.Dump(); dump != "" {
		t.Fatalf("table left behind:\n%s", dump)
	}
	// A second cleanup of a table that is gone succeeds too.
	if err := DeleteTables(t.Context(), open, knftables.IPv4Family); err != nil {
		t.Fatal(err)
	}
}
