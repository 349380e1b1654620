package clustersettest_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer); err != nil {
		t.Skipf("envtest binaries: %v", err)
	}
}

// TestClusterSetLifecycle starts a two-member ClusterSet, exports a Service with real Pods from
// one member into the other, loses and revives the exporter, and proves that Stop leaves no
// process, listener, temporary directory or goroutine behind.
func TestClusterSetLifecycle(t *testing.T) {
	requireBinaries(t)
	tmp, err := os.MkdirTemp("", "clustersettest-tmpdir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	// Everything the ClusterSet writes to disk goes here, so the test can see it all removed.
	t.Setenv("TMPDIR", tmp)
	ignore := goleak.IgnoreCurrent()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs, err := clustersettest.Start(ctx, clustersettest.Options{Members: []string{"east", "west"}, LeaseDuration: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cs.Stop()
		}
	}()
	t.Logf("2 members ready in %s (control planes %s); process tree RSS %d MiB", cs.StartedIn, cs.ControlPlanesIn, treeRSS(t)>>20)
	children := childPIDs(t)
	if len(children) != 6 {
		t.Errorf("expected etcd and kube-apiserver for the broker and 2 members, found %d child processes", len(children))
	}
	addrs := []string{hostOf(t, cs.Broker.Config.Host)}
	for _, m := range cs.Members {
		addrs = append(addrs, hostOf(t, m.Config.Host))
	}

	ns, ready := exportWeb(ctx, t, cs)

	east, west := cs.Member("east"), cs.Member("west")
	if err := east.Lose(); err != nil {
		t.Fatal(err)
	}
	if err := west.WaitForImportedAddresses(ctx, ns, "web", map[string][]string{}); err != nil {
		t.Fatal("a lost member's endpoints are withdrawn once its Lease lapses: ", err)
	}
	if err := east.Revive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := west.WaitForImportedAddresses(ctx, ns, "web", map[string][]string{"east": ready}); err != nil {
		t.Fatal("a revived member's endpoints return: ", err)
	}

	if err := cs.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if left := childPIDs(t); len(left) > 0 {
		t.Errorf("processes left after Stop: %v", left)
	}
	for _, addr := range addrs {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = conn.Close()
			t.Errorf("%s still accepts connections after Stop", addr)
		}
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in TMPDIR after Stop: %s", e.Name())
	}
	// controller-runtime's multi-namespace cache starts a goroutine per handler registration that
	// waits for the registration to sync and never ends when the cache stops first (a member
	// stopped by Lose before every watch synced); it is not ours to stop.
	goleak.VerifyNone(t, ignore,
		goleak.IgnoreTopFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformerHandlerRegistration.func1"))
}

// TestFailedStartLeavesNothing: when Start fails after its control planes are up (here the API
// server refuses a Node label), it stops what it started.
func TestFailedStartLeavesNothing(t *testing.T) {
	requireBinaries(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err := clustersettest.Start(context.Background(), clustersettest.Options{Zones: []string{"not a zone"}})
	if err == nil || !strings.Contains(err.Error(), "creating Node") {
		t.Fatalf("Start should fail creating a Node with an invalid zone label, got: %v", err)
	}
	if left := childPIDs(t); len(left) > 0 {
		t.Errorf("processes left after a failed Start: %v", left)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) > 0 {
		t.Errorf("%d entries left in TMPDIR after a failed Start", len(entries))
	}
}

func TestInvalidOptionsStartNothing(t *testing.T) {
	_, err := clustersettest.Start(context.Background(), clustersettest.Options{
		Members: []string{"a", "a", "Not_A_Label"}, IDsByFlag: []string{"z"}, NodeCPU: "lots",
	})
	for _, want := range []string{`member "a" is listed twice`, "Not_A_Label", `IDsByFlag names "z"`, `NodeCPU "lots"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error mentioning %s, got: %v", want, err)
		}
	}
}

// exportWeb exports a Service backed by two ready Pods of east and expects west to import them,
// then makes one Pod unready and expects it withdrawn. It returns the namespace and the ready
// Pod's IP.
func exportWeb(ctx context.Context, t *testing.T, cs *clustersettest.ClusterSet) (string, []string) {
	t.Helper()
	east, west := cs.Member("east"), cs.Member("west")
	ns, err := cs.CreateNamespace(ctx, "web-")
	if err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := east.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	var ips []string
	for i, zone := range []string{"zone-a", "zone-b"} {
		pod, err := east.CreatePod(ctx, ns, clustersettest.Pod{Name: "web-" + strconv.Itoa(i), Labels: map[string]string{"app": "web"}, Zone: zone})
		if err != nil {
			t.Fatal(err)
		}
		ips = append(ips, pod.Status.PodIP)
	}
	if err := east.Export(ctx, ns, "web"); err != nil {
		t.Fatal(err)
	}
	si, err := west.WaitForServiceImport(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(si.Spec.IPs) == 0 || len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
		t.Errorf("ServiceImport spec: %+v", si.Spec)
	}
	if err := west.WaitForImportedAddresses(ctx, ns, "web", map[string][]string{"east": ips}); err != nil {
		t.Fatal(err)
	}
	if err := east.SetPodReady(ctx, ns, "web-0", false); err != nil {
		t.Fatal(err)
	}
	if err := west.WaitForImportedAddresses(ctx, ns, "web", map[string][]string{"east": ips[1:]}); err != nil {
		t.Fatal(err)
	}

	// A wait that cannot succeed says what it saw.
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = west.WaitForImportedAddresses(short, ns, "web", map[string][]string{"nowhere": {"10.0.0.1"}})
	if err == nil || !strings.Contains(err.Error(), "last seen: {east: "+ips[1]+"}") {
		t.Errorf("a failed wait should report what it saw last, got: %v", err)
	}
	return ns, ips[1:]
}

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// childPIDs lists this process's live child processes (zombies excluded).
func childPIDs(t *testing.T) []int {
	t.Helper()
	self := os.Getpid()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, path := range stats {
		pid, ppid, state, ok := readStat(path)
		if ok && ppid == self && state != "Z" {
			out = append(out, pid)
		}
	}
	return out
}

func readStat(path string) (pid, ppid int, state string, ok bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, "", false
	}
	// The command name may hold spaces; the fields after its closing parenthesis do not.
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[end+1:])
	if end < 0 || len(fields) < 2 {
		return 0, 0, "", false
	}
	pid, _ = strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, ' ')]))
	ppid, _ = strconv.Atoi(fields[1])
	return pid, ppid, fields[0], true
}

// treeRSS is the resident memory of this process and its children, in bytes.
func treeRSS(t *testing.T) int64 {
	t.Helper()
	total := localset.ResidentBytes(os.Getpid())
	for _, pid := range childPIDs(t) {
		total += localset.ResidentBytes(pid)
	}
	return total
}

// TestStartupFigures measures start-up time and memory of 2- and 3-member ClusterSets for
// docs/testing.md. It runs only with CLUSTERSETTEST_FIGURES=1.
func TestStartupFigures(t *testing.T) {
	if os.Getenv("CLUSTERSETTEST_FIGURES") != "1" {
		t.Skip("set CLUSTERSETTEST_FIGURES=1 to measure")
	}
	requireBinaries(t)
	for _, n := range []int{2, 3} {
		for round := range 2 {
			members := []string{"m1", "m2", "m3"}[:n]
			cs, err := clustersettest.Start(context.Background(), clustersettest.Options{Members: members})
			if err != nil {
				t.Fatal(err)
			}
			mem, self := treeRSS(t), localset.ResidentBytes(os.Getpid())
			stopBegan := time.Now()
			err = cs.Stop()
			stoppedIn := time.Since(stopBegan)
			load, _ := os.ReadFile("/proc/loadavg")
			t.Logf("members=%d round=%d ready=%s (control planes %s) rss=%dMiB (test process %dMiB) stop=%s loadavg=%s",
				n, round, cs.StartedIn.Round(10*time.Millisecond), cs.ControlPlanesIn.Round(10*time.Millisecond), mem>>20, self>>20, stoppedIn.Round(10*time.Millisecond), strings.Fields(string(load))[0])
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
