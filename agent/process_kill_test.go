package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// chaosSize is the table and the number of kills: small in `make test`, large with
// FLEETSLICE_CHAOS=full (`make chaos`).
func chaosSize() (services, killsPerMode int) {
	if os.Getenv("FLEETSLICE_CHAOS") == "full" {
		return 5000, 10
	}
	return 500, 3
}

// hintedEndpoints are service i's four endpoints: two hinted for zone-a, two for zone-b, so
// that moving the node to the other zone changes every Service in one sync.
func hintedEndpoints(i int) []discoveryv1.Endpoint {
	var out []discoveryv1.Endpoint
	for k := range 4 {
		zone := "zone-a"
		if k >= 2 {
			zone = "zone-b"
		}
		out = append(out, discoveryv1.Endpoint{
			Addresses:  []string{endpointIP(i, k)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)},
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}},
		})
	}
	return out
}

func endpointIP(i, k int) string { return fmt.Sprintf("10.150.%d.%d", i/60, 4*(i%60)+k+1) }

// expectedTargets are the endpoints a node in zone programs.
func expectedTargets(n int, zone string) []string {
	first := 0
	if zone == "zone-b" {
		first = 2
	}
	var out []string
	for i := range n {
		out = append(out, endpointIP(i, first)+":8080", endpointIP(i, first+1)+":8080")
	}
	return out
}

// createHintedServices creates n Services with one slice each, eight writers at a time.
func createHintedServices(ns string, n int) {
	GinkgoHelper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ctx := context.Background()
				name := fmt.Sprintf("s%d", i)
				svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
				slice := &discoveryv1.EndpointSlice{
					ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
					AddressType: discoveryv1.AddressTypeIPv4,
					Endpoints:   hintedEndpoints(i),
					Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
				}
				if err := createPatiently(ctx, svc); err != nil {
					errs <- err
				} else if err := createPatiently(ctx, slice); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
}

// createPatiently creates obj, retrying what a busy API server answers while it catches up
// (timeouts, throttling, a lost connection) instead of failing: `make chaos` writes 10,000
// objects into one envtest API server beside other suites. An earlier try that landed although
// its answer was lost shows as AlreadyExists, which counts as created.
func createPatiently(ctx context.Context, obj client.Object) error {
	transient := func(err error) bool {
		return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionReset(err) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	}
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 8, Cap: 10 * time.Second}
	tried := false
	return retry.OnError(backoff, transient, func() error {
		err := k8s.Create(ctx, obj)
		if tried && apierrors.IsAlreadyExists(err) {
			return nil
		}
		tried = true
		return err
	})
}

func setZone(node, zone string) {
	GinkgoHelper()
	n := &corev1.Node{}
	Expect(k8s.Get(context.Background(), client.ObjectKey{Name: node}, n)).To(Succeed())
	n.Labels[agent.ZoneLabel] = zone
	Expect(k8s.Update(context.Background(), n)).To(Succeed())
}

func otherZone(zone string) string {
	if zone == "zone-a" {
		return "zone-b"
	}
	return "zone-a"
}

// killRow is one kill, for docs/reliability.md.
type killRow struct {
	mode, outcome      string
	delay, convergence time.Duration
	syncs              float64
	lost, duplicated   int
}

var _ = Describe("the agent process killed with SIGKILL in the middle of a large transaction", Ordered, func() {
	var (
		host     *nodeNetns
		node     string
		services int
		kills    int
		zone     = "zone-a"
		proc     *agentProcess
		rows     []killRow
		rng      = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	)
	syncs := func() float64 {
		v, err := host.metric("fleetslice_agent_sync_proxy_rules_total", map[string]string{"result": "success"})
		if err != nil {
			return -1
		}
		return v
	}
	// converge starts the agent if needed, waits until it is ready, and returns the table
	// with the time it took and the syncs it made, checking every endpoint of zone is
	// programmed exactly once.
	converge := func(started time.Time) (string, time.Duration, float64) {
		GinkgoHelper()
		if !proc.running() {
			proc = host.start(node, "--drift-check-period=200ms")
			started = proc.started
		}
		Eventually(host.ready).WithTimeout(5*time.Minute).WithPolling(10*time.Millisecond).Should(BeTrue(),
			func() string { return proc.logs() })
		took := time.Since(started)
		made := syncs()
		if took > 30*time.Second {
			// Rare under load (once in 20 restarts at 5,000 Services): keep what the agent said.
			failed, _ := host.metric("fleetslice_agent_sync_proxy_rules_total", map[string]string{"result": "error"})
			AddReportEntry(fmt.Sprintf("slow convergence (%s, %.0f failed syncs): agent log", took, failed), proc.logs())
		}
		table := host.table()
		lost, dup := endpointErrors(expectedTargets(services, zone), dnatTargets(table))
		Expect(lost).To(BeZero(), "endpoints of %s missing after convergence", zone)
		Expect(dup).To(BeZero(), "endpoints programmed twice or not of %s", zone)
		return host.canonicalTable(), took, made
	}

	BeforeAll(func() {
		services, kills = chaosSize()
		host = newNodeNetns()
		node = newNode(zone)
		ns := newNamespace()
		By(fmt.Sprintf("creating %d Services with 4 endpoints each", services))
		createHintedServices(ns, services)
		// The API server is the suite's: other specs' agents, in dry-run mode, would program
		// these Services too.
		DeferCleanup(func(ctx SpecContext) {
			// A collection deletion of thousands may outlast the API server's request timeout
			// on a busy machine; it goes on server-side, and asking again finishes it.
			for _, obj := range []client.Object{&discoveryv1.EndpointSlice{}, &corev1.Service{}} {
				Eventually(func() error { return k8s.DeleteAllOf(ctx, obj, client.InNamespace(ns)) }).
					WithTimeout(5 * time.Minute).WithPolling(time.Second).Should(Succeed())
			}
			// Thousands of deletions take a busy API server well past the default wait.
			Eventually(func() (int, error) {
				var list corev1.ServiceList
				err := k8s.List(ctx, &list, client.InNamespace(ns))
				return len(list.Items), err
			}).WithTimeout(5 * time.Minute).Should(BeZero())
		})
		proc = host.start(node, "--drift-check-period=200ms")
		converge(proc.started)
	})

	AfterAll(func() {
		var b strings.Builder
		fmt.Fprintf(&b, "%d Services x 2 programmed endpoints; kill mode | outcome | delay | convergence | syncs | lost | duplicated\n", services)
		for _, r := range rows {
			fmt.Fprintf(&b, "%s | %s | %s | %s | %.0f | %d | %d\n", r.mode, r.outcome, r.delay.Round(time.Millisecond),
				r.convergence.Round(time.Millisecond), r.syncs, r.lost, r.duplicated)
		}
		AddReportEntry("agent kill rounds", b.String())
		GinkgoWriter.Print(b.String())
	})

	// round changes every Service (the node moves zone) and kills the agent at a random
	// moment of the sync that programs it; the table must then be the old one or the new one.
	round := func(mode string, window time.Duration) killRow {
		GinkgoHelper()
		old, _, _ := converge(time.Now())
		zone = otherZone(zone)
		delay := time.Duration(rng.Int64N(int64(window) + 1))
		if mode == "restart" {
			// Most of a first sync is conversion and rendering; the transaction is its end.
			delay = window/3 + delay*2/3
		}
		if mode == "restart" {
			// The change lands while the agent is down: its first sync after the start is a
			// full one, which writes what differs (here every Service) in one transaction,
			// and the kill hits that, counted from the log line the agent writes right
			// before it.
			proc.kill()
			setZone(node, zone)
			proc = host.start(node, "--drift-check-period=200ms")
			Eventually(proc.logs).WithTimeout(time.Minute).WithPolling(time.Millisecond).Should(ContainSubstring(firstSyncLog))
		} else {
			// The agent is running: the zone change makes one incremental sync of every
			// Service.
			setZone(node, zone)
		}
		time.Sleep(delay)
		proc.kill()
		killed := host.canonicalTable()
		outcome := "old"
		restart := time.Now()
		proc = host.start(node, "--drift-check-period=200ms")
		fresh, took, made := converge(restart)
		switch killed {
		case old:
		case fresh:
			outcome = "new"
		default:
			Fail(fmt.Sprintf("after a kill %s into the %s sync the table is neither the old nor the new one:\nkilled (%d lines) vs new (%d lines)\n%s",
				delay, mode, strings.Count(killed, "\n"), strings.Count(fresh, "\n"), testutil.FirstDifference(killed, fresh)))
		}
		lost, dup := endpointErrors(expectedTargets(services, zone), dnatTargets(host.table()))
		return killRow{mode: mode, outcome: outcome, delay: delay, convergence: took, syncs: made, lost: lost, duplicated: dup}
	}

	It("leaves the old table or the new one, never a mix, when killed during an incremental sync of every Service", func() {
		// The window is how long such a sync takes, measured once without a kill.
		converge(time.Now())
		before := syncs()
		start := time.Now()
		zone = otherZone(zone)
		setZone(node, zone)
		Eventually(syncs).WithTimeout(2 * time.Minute).WithPolling(5 * time.Millisecond).Should(BeNumerically(">", before))
		window := time.Since(start)
		GinkgoWriter.Printf("one incremental sync of %d Services: %s from the Node update\n", services, window)
		for range kills {
			rows = append(rows, round("incremental", window))
		}
	})

	It("leaves the old table or the new one, never a mix, when killed during the full sync after a start", func() {
		proc.kill()
		proc = host.start(node, "--drift-check-period=200ms")
		Eventually(proc.logs).WithTimeout(time.Minute).WithPolling(time.Millisecond).Should(ContainSubstring(firstSyncLog))
		_, window, _ := converge(time.Now())
		GinkgoWriter.Printf("first full sync of %d Services, from its log line to ready: %s\n", services, window)
		for range kills {
			rows = append(rows, round("restart", window*6/5))
		}
	})

	It("counts a table deleted or edited by hand once, repairs it, and counts nothing else, through either backend", func() {
		// A counter without a series yet reads 0; an agent that does not answer is asked
		// again (by Eventually, and by read), never taken for 0.
		counter := func(name string, labels map[string]string) func() (float64, error) {
			return func() (float64, error) {
				v, err := host.metric(name, labels)
				if errors.Is(err, errNoMetric) {
					return 0, nil
				}
				return v, err
			}
		}
		read := func(c func() (float64, error)) float64 {
			GinkgoHelper()
			var v float64
			Eventually(func() (err error) { v, err = c(); return err }).Should(Succeed())
			return v
		}
		drift := func(kind string) func() (float64, error) {
			return counter(agent.MetricTableDrift, map[string]string{"kind": kind})
		}
		checks := counter("fleetslice_agent_sync_proxy_rules_nftables_drift_checks_total", nil)
		for _, backend := range []string{"netlink", "nft"} {
			proc.kill()
			proc = host.start(node, "--drift-check-period=200ms", "--nftables-backend="+backend)
			want, _, _ := converge(proc.started)
			table := host.table()
			pickChain := strings.Fields(table[strings.Index(table, "chain pick-"):])[1]
			edits := []struct{ what, kind, cmd string }{
				{"table deleted", "table-missing", "delete table ip fleetslice"},
				{"pick chain flushed", "content-changed", "flush chain ip fleetslice " + pickChain},
				{"chain added", "content-changed", "add chain ip fleetslice intruder"},
				{"map element added", "content-changed", "add element ip fleetslice service-ips { 192.0.2.1 . tcp . 80 : goto reject-service }"},
			}
			for _, e := range edits {
				what := backend + ": " + e.what
				before, otherBefore := read(drift(e.kind)), read(drift(otherKind(e.kind)))
				syncsBefore := syncs()
				start := time.Now()
				_, err := host.ns.Command("", "nft", strings.Fields(e.cmd)...)
				Expect(err).NotTo(HaveOccurred())
				Eventually(drift(e.kind)).WithPolling(5*time.Millisecond).Should(Equal(before+1), func() string { return what + ": the table now\n" + host.table() })
				// Any sync may land meanwhile (the last edit's intruder chain is deleted a
				// while after its repair): the repair is the table coming back.
				Eventually(host.canonicalTable).WithPolling(20*time.Millisecond).Should(Equal(want), "%s: not repaired", what)
				// canonicalTable leaves out empty chains: the intruder must go as well.
				Eventually(host.table).Should(Not(ContainSubstring("chain intruder")), "%s: not repaired", what)
				took := time.Since(start)
				c := read(checks)
				Eventually(checks).Should(BeNumerically(">=", c+5))
				Expect(read(drift(e.kind))).To(Equal(before+1), "%s counted more than once, or the agent's own rebuild counted", what)
				Expect(read(drift(otherKind(e.kind)))).To(Equal(otherBefore))
				made := syncs() - syncsBefore
				lost, dup := endpointErrors(expectedTargets(services, zone), dnatTargets(host.table()))
				Expect(lost + dup).To(BeZero())
				GinkgoWriter.Printf("drift %s: repaired in %s with %.0f syncs; lost %d duplicated %d\n", what,
					took.Round(time.Millisecond), made, lost, dup)
				AddReportEntry("drift "+what, fmt.Sprintf("repaired in %s, %.0f syncs, lost %d, duplicated %d",
					took.Round(time.Millisecond), made, lost, dup))
			}
		}
	})
})

// firstSyncLog is what the agent logs right before its first sync.
const firstSyncLog = "informers synced, starting to program the dataplane"

func otherKind(kind string) string {
	if kind == "table-missing" {
		return "content-changed"
	}
	return "table-missing"
}
