package dataplane

import (
	"context"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// recordClient plays a packet: it records client with endpoint ("addr . port") in a port's maps.
func recordClient(t *testing.T, fake *knftables.Fake, m affinityMap, client, endpoint string) {
	t.Helper()
	addr, port := splitEndpoint(endpoint)
	tx := fake.NewTransaction()
	tx.Add(&knftables.Element{Map: m.addr, Key: []string{client}, Value: []string{addr}})
	tx.Add(&knftables.Element{Map: m.port, Key: []string{client}, Value: []string{port}})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

func splitEndpoint(endpoint string) (string, string) {
	for i := 0; i+3 <= len(endpoint); i++ {
		if endpoint[i:i+3] == " . " {
			return endpoint[:i], endpoint[i+3:]
		}
	}
	return endpoint, ""
}

// clientsOf lists a port's clients as "client -> addr . port", a missing half as "?".
func clientsOf(t *testing.T, fake *knftables.Fake, m affinityMap) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range fake.Table.Maps[m.addr].Elements {
		out[e.Key[0]] = e.Value[0] + " . ?"
	}
	for _, e := range fake.Table.Maps[m.port].Elements {
		addr, _ := splitEndpoint(out[e.Key[0]])
		if addr == "" {
			addr = "?"
		}
		out[e.Key[0]] = addr + " . " + e.Value[0]
	}
	return out
}

// TestClientsOfAGoneEndpointAreForgotten checks forget.go: when an endpoint leaves an affinity
// port, the clients recorded with it are deleted in the same sync, the others kept; a client
// recorded with it after that sync read the maps (a connection set up just before the
// transaction) is deleted by the next sync a StaleChainDelay later, which a cleanup time asks
// for; a half entry goes too; and after that second look nothing more runs.
func TestClientsOfAGoneEndpointAreForgotten(t *testing.T) {
	s, fake, clock := newFakeSyncer(t, Options{StaleChainDelay: time.Second})
	svc := tcpService("ns", "sticky", "10.96.0.1", 80, "10.244.0.1:80", "10.244.0.2:80", "10.244.0.3:80")
	svc.AffinityTimeout = time.Hour
	mustSync(t, s, []Service{svc}, true)
	objs := renderService(&svc, ipv4)
	m := objs.affinity[0]
	recordClient(t, fake, m, "10.1.0.1", "10.244.0.1 . 80")
	recordClient(t, fake, m, "10.1.0.2", "10.244.0.2 . 80")
	recordClient(t, fake, m, "10.1.0.3", "10.244.0.3 . 80")

	svc.Ports[0].Endpoints = eps("10.244.0.2:80", "10.244.0.3:80")
	st := mustSync(t, s, []Service{svc}, false)
	want := map[string]string{"10.1.0.2": "10.244.0.2 . 80", "10.1.0.3": "10.244.0.3 . 80"}
	if got := clientsOf(t, fake, m); !equalMaps(got, want) {
		t.Fatalf("after the endpoint went: clients %v, want %v", got, want)
	}
	if want := clock.Now().Add(time.Second); !st.CleanupAt.Equal(want) {
		t.Errorf("CleanupAt = %v, want %v for the second look", st.CleanupAt, want)
	}

	// Recorded between the first look and the transaction; and a half entry.
	recordClient(t, fake, m, "10.1.0.4", "10.244.0.1 . 80")
	tx := fake.NewTransaction()
	tx.Add(&knftables.Element{Map: m.port, Key: []string{"10.1.0.5"}, Value: []string{"80"}})
	if err := fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(500 * time.Millisecond)
	if st := mustSync(t, s, []Service{svc}, false); st.Operations != 0 {
		t.Errorf("second look before its time: %+v", st)
	}
	clock.Advance(500 * time.Millisecond)
	mustSync(t, s, []Service{svc}, false)
	if got := clientsOf(t, fake, m); !equalMaps(got, want) {
		t.Fatalf("after the second look: clients %v, want %v", got, want)
	}
	// Nothing can record the gone endpoint any more (no pick leads to it, no entry names it), so
	// this one is only there to show that no third look reads the maps.
	recordClient(t, fake, m, "10.1.0.6", "10.244.0.1 . 80")
	clock.Advance(time.Hour)
	if st := mustSync(t, s, []Service{svc}, false); st.Operations != 0 || !st.CleanupAt.IsZero() {
		t.Errorf("a third look: %+v", st)
	}

	// An endpoint added reads nothing.
	svc.Ports[0].Endpoints = eps("10.244.0.2:80", "10.244.0.3:80", "10.244.0.4:80")
	mustSync(t, s, []Service{svc}, false)
	if len(s.state.forgetDue) != 0 {
		t.Errorf("an endpoint added asks for a second look: %v", s.state.forgetDue)
	}
}

// TestASecondLookWhoseMapsWentIsSettled: an endpoint goes, then its Service goes (or turns
// affinity off) before the second look; the second look has nothing to read and must not stay
// due, or the agent would be asked for a cleanup sync again and again.
func TestASecondLookWhoseMapsWentIsSettled(t *testing.T) {
	for _, ending := range []string{"removed", "affinity off", "removed at once"} {
		t.Run(ending, func(t *testing.T) {
			s, _, clock := newFakeSyncer(t, Options{StaleChainDelay: time.Second})
			svc := tcpService("ns", "sticky", "10.96.0.1", 80, "10.244.0.1:80", "10.244.0.2:80")
			svc.AffinityTimeout = time.Hour
			mustSync(t, s, []Service{svc}, true)
			svc.Ports[0].Endpoints = eps("10.244.0.2:80")
			mustSync(t, s, []Service{svc}, false)
			if len(s.state.forgetDue) != 1 {
				t.Fatalf("no second look planned: %v", s.state.forgetDue)
			}
			if ending != "removed at once" {
				clock.Advance(300 * time.Millisecond)
			} else {
				clock.Advance(time.Second)
			}
			var services []Service
			if ending == "affinity off" {
				svc.AffinityTimeout = 0
				services = []Service{svc}
			}
			mustSync(t, s, services, false)
			clock.Advance(time.Hour)
			st := mustSync(t, s, services, false)
			if len(s.state.forgetDue) != 0 {
				t.Errorf("second looks left: %v (last sync %+v)", s.state.forgetDue, st)
			}
			clock.Advance(time.Hour)
			if st := mustSync(t, s, services, false); st.Operations != 0 || !st.CleanupAt.IsZero() {
				t.Errorf("still asking for a cleanup: %+v", st)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestKernelForgetsClientsInEitherFamily runs forgetting against the kernel, through both
// backends and in both families: clients recorded in the maps (added with nft, as packets would
// add them) are read back in each backend's own way, and only the gone endpoint's go.
func TestKernelForgetsClientsInEitherFamily(t *testing.T) {
	requireKernel(t)
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "forget"))
	cases := []struct {
		family        knftables.Family
		ip            string
		endpoints     []string // the first goes
		clients, kept []string // a client per endpoint; those that stay
	}{
		{knftables.IPv4Family, "10.96.0.1", []string{"10.244.0.1:80", "10.244.0.2:80"},
			[]string{"10.1.0.1", "10.1.0.2"}, []string{"10.1.0.2"}},
		{knftables.IPv6Family, "fd00:96::1", []string{"[fd00:244::1]:80", "[fd00:244::2]:80"},
			[]string{"fd00:1::1", "fd00:1::2"}, []string{"fd00:1::2"}},
	}
	for _, backend := range kernelBackends {
		for _, tc := range cases {
			t.Run(backend+"/"+string(tc.family), func(t *testing.T) {
				s, nft := openBackend(t, ns, backend, tc.family, Options{})
				svc := tcpService("ns", "sticky", tc.ip, 80, tc.endpoints...)
				svc.AffinityTimeout = time.Hour
				var err error
				ns.do(func() { _, err = s.Sync(context.Background(), []Service{svc}, true) })
				if err != nil {
					t.Fatal(err)
				}
				m := renderService(&svc, mustFamily(tc.family)).affinity[0]
				tx := nft.NewTransaction()
				for i, client := range tc.clients {
					ep := eps(tc.endpoints[i])[0].Addr
					tx.Add(&knftables.Element{Map: m.addr, Key: []string{client}, Value: []string{ep.Addr().String()}})
					tx.Add(&knftables.Element{Map: m.port, Key: []string{client}, Value: []string{"80"}})
				}
				ns.do(func() { err = nft.Run(context.Background(), tx) })
				if err != nil {
					t.Fatal(err)
				}
				svc.Ports[0].Endpoints = eps(tc.endpoints[1:]...)
				ns.do(func() { _, err = s.Sync(context.Background(), []Service{svc}, false) })
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range []string{m.addr, m.port} {
					var elems []*knftables.Element
					ns.do(func() { elems, err = nft.ListElements(context.Background(), "map", name) })
					var got []string
					for _, e := range elems {
						got = append(got, e.Key[0])
					}
					if err != nil || !slices.Equal(got, tc.kept) {
						t.Errorf("map %s holds clients %v (%v), want %v", name, got, err, tc.kept)
					}
				}
			})
		}
	}
}

func mustFamily(f knftables.Family) family {
	fam, _ := familyFor(f)
	return fam
}
