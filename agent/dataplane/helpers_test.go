package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

func eps(addrs ...string) []Endpoint {
	out := make([]Endpoint, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, Endpoint{Addr: netip.MustParseAddrPort(a)})
	}
	return out
}

func ips(addrs ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func tcpService(ns, name, ip string, port uint16, endpoints ...string) Service {
	return Service{
		Namespace: ns, Name: name, ClusterIPs: ips(ip),
		Ports: []Port{{Name: "http", Protocol: TCP, Port: port, Endpoints: eps(endpoints...)}},
	}
}

// fakeClock advances only when told to, so stale-chain ageing is exact.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func newFakeSyncer(t testing.TB, opts Options) (*Syncer, *knftables.Fake, *fakeClock) {
	t.Helper()
	fam, _ := familyFor(opts.Family)
	fake := knftables.NewFake(fam.nft, TableName)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if opts.Clock == nil {
		opts.Clock = clock.Now
	}
	s, err := New(fake, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, fake, clock
}

func mustSync(t testing.TB, s *Syncer, services []Service, full bool) Stats {
	t.Helper()
	st, err := s.Sync(context.Background(), services, full)
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return st
}

// canonicalDump is the fake's dump without chains that have no rules: the
// only empty chains are stale ones awaiting their delayed deletion, which a
// freshly rebuilt table would not have.
func canonicalDump(fake *knftables.Fake) string {
	dump := fake.Dump()
	used := map[string]bool{}
	for _, line := range strings.Split(dump, "\n") {
		if rest, ok := strings.CutPrefix(line, "add rule "); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 3 {
				used[fields[2]] = true
			}
		}
	}
	var out []string
	for _, line := range strings.Split(dump, "\n") {
		if rest, ok := strings.CutPrefix(line, "add chain "); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 3 && !used[fields[2]] {
				continue
			}
		}
		out = append(out, line)
	}
	// Element order inside a map depends on insertion order in the fake;
	// the kernel does not keep it either.
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// freshRender is what a full sync of services into an empty table gives.
func freshRender(t testing.TB, services []Service, opts Options) string {
	t.Helper()
	s, fake, _ := newFakeSyncer(t, opts)
	mustSync(t, s, services, true)
	return canonicalDump(fake)
}

// failingNFT wraps an Interface and fails Run while failNext is set, without
// applying anything, like a kernel refusing a transaction.
type failingNFT struct {
	knftables.Interface
	failNext bool
	runs     int
}

var errKernelRefused = errors.New("simulated: netlink: Error: Could not process rule: No such file or directory")

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	f.runs++
	if f.failNext {
		f.failNext = false
		return errKernelRefused
	}
	return f.Interface.Run(ctx, tx)
}

// discardNFT builds transactions but runs nothing, to time the Syncer alone.
type discardNFT struct {
	knftables.Interface
	lastOps   int
	lastBytes int
}

func (d *discardNFT) Run(_ context.Context, tx *knftables.Transaction) error {
	d.lastOps = tx.NumOperations()
	d.lastBytes = len(tx.String())
	return nil
}

// scaleServices makes n Services with perService endpoints each, on
// distinct cluster IPs in 10.96.0.0/12 and endpoints in 10.128.0.0/9.
func scaleServices(n, perService int) []Service {
	out := make([]Service, n)
	for i := range out {
		out[i] = Service{
			Namespace:  fmt.Sprintf("ns-%d", i%50),
			Name:       fmt.Sprintf("svc-%d", i),
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})},
			Ports:      []Port{{Name: "http", Protocol: TCP, Port: 80, Endpoints: scaleEndpoints(i, perService, 0)}},
		}
	}
	return out
}

func scaleEndpoints(service, n, generation int) []Endpoint {
	out := make([]Endpoint, n)
	for j := range out {
		k := service*n + j
		out[j] = Endpoint{Addr: netip.AddrPortFrom(
			netip.AddrFrom4([4]byte{10, 128 + byte(k>>16), byte(k >> 8), byte(k)}), uint16(8080+generation))}
	}
	return out
}

// endpointValue is an endpoint as the endpoint maps hold it: address . port.
func endpointValue(ep netip.AddrPort) []ruleset.Value {
	return []ruleset.Value{ruleset.Addr(ep.Addr()), ruleset.Port(ep.Port())}
}
