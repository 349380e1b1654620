package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// strictNFT makes the fake as strict as the kernel about map elements: the
// fake silently overwrites an element added under an existing key, while
// the kernel refuses when the value differs.
type strictNFT struct {
	*knftables.Fake
	failNext bool
}

func (s *strictNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if s.failNext {
		s.failNext = false
		return errKernelRefused
	}
	if err := s.checkElements(tx); err != nil {
		return err
	}
	return s.Fake.Run(ctx, tx)
}

func (s *strictNFT) checkElements(tx *knftables.Transaction) error {
	overlay := map[string]string{} // map|key -> value, "" when deleted
	tableGone := false
	lookup := func(m, key string) (string, bool) {
		if v, ok := overlay[m+"|"+key]; ok {
			return v, v != ""
		}
		if tableGone || s.Table == nil || s.Table.Maps[m] == nil {
			return "", false
		}
		e := s.Table.Maps[m].FindElement(strings.Split(key, " . ")...)
		if e == nil {
			return "", false
		}
		return e.Value[0], true
	}
	for _, line := range strings.Split(tx.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "delete table "):
			tableGone, overlay = true, map[string]string{}
		case strings.HasPrefix(line, "add element ") || strings.HasPrefix(line, "delete element "):
			fields := strings.Fields(line)
			m := fields[4]
			body := strings.TrimSuffix(strings.TrimPrefix(strings.Join(fields[5:], " "), "{ "), " }")
			key, value, isMap := strings.Cut(body, " : ")
			if fields[0] == "delete" {
				overlay[m+"|"+key] = ""
				continue
			}
			if !isMap {
				continue
			}
			if old, ok := lookup(m, key); ok && old != value {
				return fmt.Errorf("simulated kernel: element %s { %s } exists with value %q, not %q", m, key, old, value)
			}
			overlay[m+"|"+key] = value
		}
	}
	return nil
}

// mutate applies one fuzz-chosen change to a small world of Services.
func mutate(world []Service, present []bool, op, arg byte) {
	i := int(op) % len(world)
	svc := &world[i]
	p := &svc.Ports[0]
	switch (op >> 3) % 9 {
	case 0:
		present[i] = !present[i]
	case 1:
		n := int(arg % 4)
		p.Endpoints = nil
		for j := 0; j < n; j++ {
			p.Endpoints = append(p.Endpoints, Endpoint{
				Addr:  netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), byte(j + int(arg>>4))}), 8080),
				Local: (arg>>2)&1 == 1 && j == 0,
			})
		}
	case 2:
		svc.AffinityTimeout = time.Duration(arg%3) * time.Minute
	case 3:
		p.NodePort = 0
		if arg%2 == 1 {
			p.NodePort = 30000 + uint16(arg%5) // small range, so NodePorts clash
		}
	case 4:
		p.ExternalLocal = arg%2 == 1
		p.ExternalEndpoints = nil
		if arg%4 == 3 && len(p.Endpoints) > 0 {
			p.ExternalEndpoints = p.Endpoints[:1]
		}
	case 5:
		svc.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, arg % 8})} // may clash
	case 6:
		if len(svc.Ports) == 1 {
			svc.Ports = append(svc.Ports, Port{Name: "extra", Protocol: UDP, Port: 53, Endpoints: p.Endpoints})
		} else {
			svc.Ports = svc.Ports[:1]
		}
	case 7:
		p.Port = 80 + uint16(arg%3)
	case 8:
		svc.ClusterIPs = append(svc.ClusterIPs, netip.AddrFrom4([4]byte{242, 1, 0, arg}))
	}
}

func initialWorld(n int) ([]Service, []bool) {
	world := make([]Service, n)
	present := make([]bool, n)
	for i := range world {
		world[i] = tcpService("w", fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.0.%d", 100+i), 80,
			fmt.Sprintf("10.244.%d.1:8080", i))
		present[i] = true
	}
	return world, present
}

func snapshot(world []Service, present []bool) []Service {
	var out []Service
	for i, s := range world {
		if present[i] {
			c := s
			c.ClusterIPs = append([]netip.Addr(nil), s.ClusterIPs...)
			c.Ports = append([]Port(nil), s.Ports...)
			out = append(out, c)
		}
	}
	return out
}

// checkSequence replays ops (pairs of bytes) as incremental syncs, with a full sync and a
// restart (a new Syncer on the same table) now and then, and checks after each that the table
// equals a fresh full render, that the kernel-like element rules hold, and that failures are
// recovered from.
// With changesOnly, each sync is told only the Service that changed
// (SyncChanges), and falls back to every Service when the Syncer asks.
// It returns how many syncs SyncChanges did on its own.
func checkSequence(t *testing.T, ops []byte, changesOnly bool) (fromChanges int) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	nft := &strictNFT{Fake: fake}
	clock := &fakeClock{now: time.Unix(0, 0)}
	opts := Options{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}}
	newSyncer := func() *Syncer {
		s, err := New(nft, Options{PodCIDRs: opts.PodCIDRs, Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := newSyncer()
	world, present := initialWorld(5)
	ctx := context.Background()
	for step := 0; step+1 < len(ops); step += 2 {
		mutate(world, present, ops[step], ops[step+1])
		services := snapshot(world, present)
		i := int(ops[step]) % len(world)
		if ops[step+1]%13 == 5 {
			s = newSyncer() // an agent restart: a Syncer that remembers nothing, on the same table
		}
		sync := func() (Stats, error) {
			if ops[step+1]%7 == 3 { // a periodic full sync
				return s.Sync(ctx, services, true)
			}
			if !changesOnly {
				return s.Sync(ctx, services, false)
			}
			changed, removed := snapshot(world[i:i+1], present[i:i+1]), []string{world[i].Key()}
			st, err := s.SyncChanges(ctx, changed, removed)
			if errors.Is(err, ErrNeedsEverything) {
				return s.Sync(ctx, services, false)
			}
			fromChanges++
			return st, err
		}
		if ops[step+1]%11 == 0 {
			nft.failNext = true
			_, err := sync()
			switch {
			case nft.failNext: // nothing to do, so nothing ran
				nft.failNext = false
			case err == nil:
				t.Fatalf("step %d: injected failure not reported", step)
			}
		}
		if _, err := sync(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got, want := canonicalDump(fake), freshRender(t, services, opts); got != want {
			t.Fatalf("step %d: incremental table differs from a fresh render:\n%s", step, lineDiff(want, got))
		}
		clock.Advance(time.Duration(ops[step]%3) * time.Second)
	}
	return fromChanges
}

func TestRandomChangeSequencesMatchFullRender(t *testing.T) {
	seq := make([]byte, 400)
	x := uint32(12345)
	for i := range seq {
		x = x*1664525 + 1013904223
		seq[i] = byte(x >> 24)
	}
	checkSequence(t, seq, false)
	// The world's small address ranges make Services contend often, when SyncChanges declines.
	if n := checkSequence(t, seq, true); n < len(seq)/2/4 {
		t.Errorf("SyncChanges synced on its own %d times in %d steps", n, len(seq)/2)
	} else {
		t.Logf("SyncChanges synced on its own %d times in %d steps", n, len(seq)/2)
	}
}

func FuzzIncrementalMatchesFull(f *testing.F) {
	f.Add([]byte{0, 1, 8, 3, 16, 2, 24, 1, 32, 3})
	f.Add([]byte{40, 5, 41, 5, 48, 1, 56, 7, 64, 200, 1, 0})
	f.Add([]byte{9, 3, 17, 1, 25, 3, 33, 7, 10, 2, 2, 11})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		checkSequence(t, ops, false)
		checkSequence(t, ops, true)
	})
}
