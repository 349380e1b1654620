package localset

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestReservedPortsAreDistinctAcrossConcurrentCallers(t *testing.T) {
	const callers, each = 8, 6
	// Exactly enough ports for every caller: a port handed out twice leaves another caller short.
	r := portRegistry{dir: t.TempDir(), ephemeralLow: lowestPort + callers*each}
	for p := lowestPort; p < r.ephemeralLow; p++ {
		if !portFree(uint32(p)) {
			t.Skipf("port %d is in use here", p)
		}
	}
	got := make([][]uint32, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { got[i], errs[i] = r.reserve(each) })
	}
	wg.Wait()
	seen := map[uint32]bool{}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if len(got[i]) != each {
			t.Fatalf("caller %d got %d ports, want %d", i, len(got[i]), each)
		}
		for _, p := range got[i] {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if p < lowestPort || int(p) >= r.ephemeralLow {
				t.Fatalf("port %d outside [%d, %d)", p, lowestPort, r.ephemeralLow)
			}
		}
	}
}

func TestReserveSkipsLivePortsAndBoundOnes(t *testing.T) {
	// A tiny range makes every port matter: 10000..10005, of which one is bound and two are held
	// by this (live) process already.
	r := portRegistry{dir: t.TempDir(), ephemeralLow: lowestPort + 6}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(lowestPort))
	if err != nil {
		t.Skipf("port %d is in use here: %v", lowestPort, err)
	}
	defer l.Close()
	first, err := r.reserve(2)
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.reserve(3)
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(first), second...)
	slices.Sort(all)
	if slices.Contains(all, lowestPort) || len(slices.Compact(all)) != 5 {
		t.Fatalf("reserved %v: want 5 distinct ports, none of them the bound %d", all, lowestPort)
	}
	if _, err := r.reserve(1); err == nil {
		t.Fatal("reserved a port from an exhausted range")
	}
}

func TestDeadProcessesReservationsAreReleased(t *testing.T) {
	r := portRegistry{dir: t.TempDir(), ephemeralLow: lowestPort + 3}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for p := lowestPort; p < lowestPort+3; p++ {
		lines = append(lines, fmt.Sprintf("%d %d", p, dead.Process.Pid))
	}
	// A torn line from a crash mid-write reserves nothing either.
	if err := os.WriteFile(r.path(), []byte(strings.Join(lines, "\n")+"\n10001 "), 0o644); err != nil {
		t.Fatal(err)
	}
	ports, err := r.reserve(3)
	if err != nil {
		t.Fatalf("the dead process's ports were not released: %v", err)
	}
	raw, err := os.ReadFile(r.path())
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d %d", ports[0], os.Getpid()); !strings.Contains(string(raw), want) || strings.Contains(string(raw), strconv.Itoa(dead.Process.Pid)) {
		t.Fatalf("registry after reclaiming:\n%s", raw)
	}
}

func TestComponentsRunningNamesTheDeadOneWithItsLog(t *testing.T) {
	cs := &ClusterSet{Workdir: t.TempDir(), Broker: BrokerName, Members: []string{MemberName(1)}}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	component := func(cluster, name string, pid int, log string) {
		dir := cs.Workdir + "/kwok/clusters/" + cluster
		for _, sub := range []string{"/pids", "/logs"} {
			if err := os.MkdirAll(dir+sub, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(dir+"/pids/"+name+".pid", []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/logs/"+name+".log", []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	component(BrokerName, "kube-apiserver", os.Getpid(), "serving\n")
	component(MemberName(1), "kube-apiserver", os.Getpid(), "serving\n")
	if err := cs.componentsRunning(); err != nil {
		t.Fatalf("all components run, got %v", err)
	}
	component(MemberName(1), "kwok-controller", dead.Process.Pid, "starting\nlisten tcp :32763: bind: address already in use\n")
	err := cs.componentsRunning()
	if err == nil || !strings.Contains(err.Error(), "cluster-1: kwok-controller") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("want the dead kwok-controller of cluster-1 with its log, got %v", err)
	}
	if !errors.Is(err, errComponentExited) {
		t.Fatalf("a dead component must be told apart, so that Up starts the ClusterSet again: %v", err)
	}
}

func TestPodCIDRsAreDisjointAndRoomyAcrossTheClusterSet(t *testing.T) {
	var ranges []*net.IPNet
	for member := 1; member <= 3; member++ {
		for i := range maxNodesPerCluster {
			_, r, err := net.ParseCIDR(podCIDR(member, i))
			if err != nil {
				t.Fatalf("podCIDR(%d, %d): %v", member, i, err)
			}
			// Room for a Node's 250 Pods and as many addresses still held by deleted ones.
			if ones, bits := r.Mask.Size(); 1<<(bits-ones) < 2*250 {
				t.Fatalf("podCIDR(%d, %d) = %s holds fewer than 500 addresses", member, i, r)
			}
			for _, other := range ranges {
				if other.Contains(r.IP) || r.Contains(other.IP) {
					t.Fatalf("podCIDR(%d, %d) = %s overlaps %s", member, i, r, other)
				}
			}
			ranges = append(ranges, r)
		}
	}
	_, services, _ := net.ParseCIDR(serviceCIDR)
	for _, r := range ranges {
		if services.Contains(r.IP) {
			t.Fatalf("Pod range %s inside the Service range %s", r, serviceCIDR)
		}
	}
}
