package chaos

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/faultproxy"
)

var _ = Describe("faults", Ordered, func() {
	It("restarts every manager with nothing changed and writes nothing", func(ctx SpecContext) {
		before := map[*replica]writes{}
		for _, m := range fleet {
			r := m.replicas[0]
			Expect(r.idle(ctx, 3*time.Second)).To(Succeed())
			before[r] = r.counts()
		}
		serverBefore := serverWrites(ctx)
		gaps, err := followRenewals()
		Expect(err).NotTo(HaveOccurred())
		t0 := time.Now()
		for _, m := range fleet {
			r := m.replicas[0]
			Expect(r.stop()).To(Succeed())
			Expect(r.start()).To(Succeed())
		}
		for r := range before {
			Expect(r.idle(ctx, 5*time.Second)).To(Succeed())
		}
		converged := time.Since(t0)
		longest := gaps.stop()
		var total writes
		for r, b := range before {
			w := r.counts().sub(b)
			Expect(w.total()).To(BeZero(), "%s wrote after a restart with nothing changed: %s (longest member Lease renewal gaps: %s; lease %s; events recorded since the restart: %v)",
				r.name, w, longest, size.Lease, eventsSince(ctx, r.member, t0))
			total = addWrites(total, w)
		}
		// The same, as the API servers counted it, for what only fleetslice writes there.
		for cluster, w := range serverWrites(ctx) {
			Expect(w.Sub(serverBefore[cluster]).Total()).To(BeZero(), "%s's API server served writes after a restart with nothing changed: %v",
				cluster, w.Sub(serverBefore[cluster]).Served)
		}
		lost, dup := disturbed(t0, nil)
		record(row{Fault: "every manager restarted, nothing changed", Injected: "SIGTERM, then the same binary started again",
			Converged: converged, Writes: total, Lost: lost, Duplicated: dup,
			Note: fmt.Sprintf("converged = until both managers were idle; zero writes asserted at the proxies and at the API servers; longest member Lease renewal gaps %s (lease %s)", longest, size.Lease)})
		settled(ctx, t0)
		Expect(lost+dup).To(BeZero(), "the steady Service was disturbed: %v", steady.since(t0))
	})

	It("rolls out without a fault, as the baseline of the rollouts below", func(ctx SpecContext) {
		m := fleet[0]
		r := m.replicas[0]
		t0, before := time.Now(), r.counts()
		Expect(rollOut(ctx, m, web)).To(Succeed())
		converged := settled(ctx, t0)
		lost, dup := disturbed(t0, nil)
		record(row{Fault: "none (baseline)", Injected: fmt.Sprintf("a %d-Pod rollout", size.RolloutPods),
			Converged: converged, Writes: r.counts().sub(before), Lost: lost, Duplicated: dup,
			Note: "converged counts from the rollout's start: what the rows below take without their fault"})
		Expect(lost+dup).To(BeZero(), "the steady Service was disturbed: %v", steady.since(t0))
	})

	It("recovers when the manager is killed in the middle of a rollout", func(ctx SpecContext) {
		m := fleet[0]
		r := m.replicas[0]
		t0, before := time.Now(), r.counts()
		Expect(rollOut(ctx, m, web)).To(Succeed())
		waitProgress(ctx, m, web, 0.3)
		Expect(r.kill()).To(Succeed())
		time.Sleep(time.Second)
		Expect(r.start()).To(Succeed())
		back := time.Now()
		converged := settled(ctx, back)
		lost, dup := disturbed(t0, nil)
		record(row{Fault: "manager SIGKILLed mid-rollout", Injected: fmt.Sprintf("SIGKILL with 30%% of a %d-Pod rollout done, restarted 1 s later", size.RolloutPods),
			Converged: converged, Writes: r.counts().sub(before), Lost: lost, Duplicated: dup,
			Note: fmt.Sprintf("%s from the rollout's start", (back.Sub(t0) + converged).Round(100*time.Millisecond))})
		Expect(lost+dup).To(BeZero(), "the steady Service was disturbed: %v", steady.since(t0))
	})

	It("recovers when kube-apiserver restarts over a compacted etcd in the middle of a rollout", func(ctx SpecContext) {
		m := fleet[0]
		r := m.replicas[0]
		apiserver, err := clusterSet.Component(m.name, "kube-apiserver")
		Expect(err).NotTo(HaveOccurred())
		t0, before := time.Now(), r.counts()
		waitsBefore, err := r.reconnectWaits(ctx, "member")
		Expect(err).NotTo(HaveOccurred())
		Expect(rollOut(ctx, m, web)).To(Succeed())
		waitProgress(ctx, m, web, 0.3)
		rev, err := clusterSet.CompactEtcd(ctx, m.name)
		Expect(err).NotTo(HaveOccurred())
		Expect(apiserver.Stop(ctx, syscall.SIGTERM)).To(Succeed())
		Expect(apiserver.Start()).To(Succeed())
		back := time.Now()
		Eventually(func() error { return m.client.List(ctx, &appsv1.DeploymentList{}, client.InNamespace(namespace)) }).
			WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		converged := settled(ctx, back)
		Expect(r.unexpectedRestarts()).To(BeZero(), "the manager must ride out an API server restart: %s", r.running().Describe(20))
		w := r.counts().sub(before)
		lists := w.api.Requests("list")
		// Every informer lists again once its watch cannot resume: the proof the fault struck.
		Expect(lists).To(BeNumerically(">", 0), "no informer listed again after the restart")
		// The member cache waited out the restart at its gate rather than in reflector back-off.
		waits, err := r.reconnectWaits(ctx, "member")
		Expect(err).NotTo(HaveOccurred())
		Expect(waits).To(BeNumerically(">", waitsBefore), "no list or watch of the member cache waited for the API server at its gate")
		lost, dup := disturbed(t0, nil)
		record(row{Fault: "kube-apiserver restarted, etcd compacted, mid-rollout", Injected: fmt.Sprintf("etcd compacted at revision %d, kube-apiserver SIGTERMed and started again", rev),
			Converged: converged, Writes: w, Lost: lost, Duplicated: dup, Note: fmt.Sprintf("%d lists as the manager's informers started over; %s from the rollout's start", lists, (back.Sub(t0) + converged).Round(100*time.Millisecond))})
		Expect(lost+dup).To(BeZero(), "the steady Service was disturbed: %v", steady.since(t0))
	})

	It("converges while a fifth of its writes fail with 409 and 500", func(ctx SpecContext) {
		m := fleet[0]
		r := m.replicas[0]
		faults := []faultproxy.Fault{{Code: http.StatusConflict}, {Code: http.StatusInternalServerError},
			{Code: http.StatusInternalServerError, AfterApply: true}}
		proxies := []*faultproxy.Proxy{r.api, r.broker, fleet[1].replicas[0].broker}
		for i, p := range proxies {
			p.FailWrites(0.2, uint64(i+1), faults...)
		}
		DeferCleanup(func() {
			for _, p := range proxies {
				p.FailWrites(0, 0)
			}
		})
		t0, before := time.Now(), r.counts()
		Expect(rollOut(ctx, m, web)).To(Succeed())
		converged := settled(ctx, t0)
		w := r.counts().sub(before)
		failed := w.api.Failed() + w.broker.Failed()
		Expect(failed).To(BeNumerically(">", 0), "no write failed: the fault did not strike (%s)", w)
		lost, dup := disturbed(t0, nil)
		record(row{Fault: "writes failing", Injected: "20% of the manager's writes answered 409 or 500 (a third of the 500s after the write applied), member and broker",
			Converged: converged, Writes: w, Lost: lost, Duplicated: dup,
			Note: fmt.Sprintf("%d writes failed; converged counts from the rollout's start, faults on throughout", failed)})
		Expect(lost+dup).To(BeZero(), "the steady Service was disturbed: %v", steady.since(t0))
	})

	It("keeps every import through a broker outage and catches up after it", func(ctx SpecContext) {
		brokerAPI, err := clusterSet.Component(clusterSet.Broker, "kube-apiserver")
		Expect(err).NotTo(HaveOccurred())
		t0, before := time.Now(), fleetWrites()
		Expect(brokerAPI.Stop(ctx, syscall.SIGTERM)).To(Succeed())
		DeferCleanup(func() {
			if !brokerAPI.Running() {
				_ = brokerAPI.Start()
			}
		})
		// Exported while the broker is away: it must arrive once the broker is back.
		second := fleet[1]
		Expect(createExported(ctx, second.client, late, 3)).To(Succeed())
		Eventually(func() error { return rolledOut(ctx, second) }).WithContext(ctx).WithTimeout(size.Settle).Should(Succeed())
		// The new Service's own slices follow its Pods within moments; every import must stay.
		Eventually(func() error {
			a, err := check(ctx)
			if err != nil {
				return err
			}
			return a.err()
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "imports must stay while the broker is down")
		time.Sleep(size.BrokerOutage - time.Since(t0))
		Expect(brokerAPI.Start()).To(Succeed())
		back := time.Now()
		outage := back.Sub(t0)
		lateExports = append(lateExports, late)
		converged := settled(ctx, back)
		lost, dup := disturbed(t0, nil)
		w := fleetWrites().sub(before)
		record(row{Fault: "broker down", Injected: fmt.Sprintf("the broker's kube-apiserver stopped for %s; a Service exported meanwhile", outage.Round(time.Second)),
			Converged: converged, Writes: w, Lost: lost, Duplicated: dup,
			Note: fmt.Sprintf("imports checked intact at the end of the outage; the new export imported after it; %d requests could not reach the broker meanwhile", w.broker.Unreachable())})
		Expect(lost+dup).To(BeZero(), "a broker outage is not a lost member: %v", steady.since(t0))
	})

	It("withdraws a member cut off from the broker after its lease and restores it when it returns", func(ctx SpecContext) {
		cut, other := fleet[0], fleet[1]
		r := cut.replicas[0]
		t0, before := time.Now(), fleetWrites()
		r.broker.Cut()
		DeferCleanup(r.broker.Restore)
		Eventually(func() (int, error) { return importedFrom(ctx, other, cut.name) }).
			WithContext(ctx).WithTimeout(3*size.Lease + time.Minute).WithPolling(200 * time.Millisecond).Should(BeZero())
		withdrawn := time.Since(t0)
		r.broker.Restore()
		back := time.Now()
		converged := settled(ctx, back)
		expected := func(v violation) bool { return v.Member == other.name && v.Source == cut.name }
		lost, dup := disturbed(t0, expected)
		record(row{Fault: "member partitioned from the broker", Injected: fmt.Sprintf("%s's broker connection cut until its imports were withdrawn elsewhere (lease %s)", cut.name, size.Lease),
			Converged: converged, Writes: fleetWrites().sub(before), Lost: lost, Duplicated: dup,
			Note: fmt.Sprintf("withdrawn in %s after %s; converged = restored", other.name, withdrawn.Round(100*time.Millisecond))})
		Expect(lost+dup).To(BeZero(), "only the cut member's imports may go: %v", steady.since(t0))
	})

	It("hands over to the standby replica when the leader is killed, without duplicate writes", func(ctx SpecContext) {
		m := fleet[1]
		first := m.replicas[0]
		Expect(first.stop()).To(Succeed())
		// The suite's 15 s cluster lease needs a hand-over quicker than controller-runtime's
		// default 15 s leader Lease, or peers would withdraw the member meanwhile (the manager
		// refuses such flags: ValidateLeaderElection).
		election := []string{"--leader-elect", "--leader-election-namespace", "kube-system",
			"--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s"}
		first.args = append(first.args, election...)
		Expect(first.start()).To(Succeed())
		Expect(m.startReplica(election)).To(Succeed())
		second := m.replicas[1]
		var leader, standby *replica
		Eventually(func() error {
			leader, standby = nil, nil
			for _, r := range []*replica{first, second} {
				lead, err := r.leads(ctx)
				if err != nil {
					return err
				}
				if lead {
					leader = r
				} else {
					standby = r
				}
			}
			if leader == nil || standby == nil {
				return fmt.Errorf("no single leader yet")
			}
			return nil
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(leader.idle(ctx, 3*time.Second)).To(Succeed())
		t0, beforeLeader, beforeStandby := time.Now(), leader.counts(), standby.counts()
		Expect(rollOut(ctx, m, api)).To(Succeed())
		waitProgress(ctx, m, api, 0.3)
		standbyWrote := standby.counts().sub(beforeStandby)
		Expect(standbyWrote.total()).To(BeZero(), "the standby wrote while the leader led: %s", standbyWrote)
		Expect(leader.kill()).To(Succeed())
		killed := time.Now()
		Eventually(func() (bool, error) { return standby.leads(ctx) }).
			WithContext(ctx).WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(BeTrue())
		handOver := time.Since(killed)
		converged := settled(ctx, killed)
		w := addWrites(leader.counts().sub(beforeLeader), standby.counts().sub(beforeStandby))
		lost, dup := disturbed(t0, nil)
		record(row{Fault: "leader killed (two replicas)", Injected: "SIGKILL to the leading replica mid-rollout; the standby waits out the leader Lease",
			Converged: converged, Writes: w, Lost: lost, Duplicated: dup,
			Note: fmt.Sprintf("hand-over %s (leader Lease 5 s, retry 1 s); the standby wrote nothing while it stood by", handOver.Round(100*time.Millisecond))})
		Expect(lost+dup).To(BeZero(), "the steady Service was disturbed: %v", steady.since(t0))
		// The killed replica comes back as the new standby, as its Deployment would restart it.
		Expect(leader.start()).To(Succeed())
	})
})

// late is the Service exported while the broker is down.
const late = "late"

// lateExports are Services exported by the second member after the suite started.
var lateExports []string

// waitProgress waits until a fraction of the Deployment's Pods run the new template.
func waitProgress(ctx context.Context, m *member, name string, fraction float64) {
	GinkgoHelper()
	Eventually(func() (float64, error) {
		d := &appsv1.Deployment{}
		if err := m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
			return 0, err
		}
		return float64(d.Status.UpdatedReplicas) / float64(ptr.Deref(d.Spec.Replicas, 1)), nil
	}).WithContext(ctx).WithTimeout(size.Settle).WithPolling(100 * time.Millisecond).Should(BeNumerically(">=", fraction))
}

// importedFrom counts the imported slices in m that came from source.
func importedFrom(ctx context.Context, m *member, source string) (int, error) {
	list := &discoveryv1.EndpointSliceList{}
	err := m.client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{mcsv1beta1.LabelSourceCluster: source})
	return len(list.Items), err
}

// disturbed counts the steady watch's bad observations since t0, leaving out those expected.
func disturbed(t0 time.Time, expected func(violation) bool) (lost, duplicated int) {
	for _, v := range steady.since(t0) {
		if expected != nil && expected(v) {
			continue
		}
		if v.Twice {
			duplicated++
		}
		if v.Missing {
			lost++
		}
	}
	return lost, duplicated
}

// fleetWrites sums every replica's writes.
func fleetWrites() writes {
	var w writes
	for _, m := range fleet {
		for _, r := range m.replicas {
			w = addWrites(w, r.counts())
		}
	}
	return w
}

func addWrites(a, b writes) writes {
	return writes{api: a.api.Add(b.api), broker: a.broker.Add(b.broker)}
}

// serverWrites reads, from each API server's own metrics, the writes of the resources only
// fleetslice writes there: slices, imports and exports in members, all but Leases in the broker.
// eventsSince describes the events of the member recorded or repeated after t, to say which
// decision a restarted manager announced.
func eventsSince(ctx context.Context, m *member, t time.Time) []string {
	list := &eventsv1.EventList{}
	if err := m.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range list.Items {
		last, count := e.EventTime.Time, int32(1)
		if e.Series != nil {
			last, count = e.Series.LastObservedTime.Time, e.Series.Count
		}
		if last.After(t) {
			out = append(out, fmt.Sprintf("%s %s/%s by %s (%s, %d times, last %s): %s", e.Reason, e.Regarding.Kind, e.Regarding.Name,
				e.ReportingController, e.Action, count, last.Format(time.RFC3339Nano), e.Note))
		}
	}
	return out
}

func serverWrites(ctx context.Context) map[string]apimetrics.Writes {
	GinkgoHelper()
	out := map[string]apimetrics.Writes{}
	for _, cluster := range append([]string{clusterSet.Broker}, clusterSet.Members...) {
		cfg, err := clusterSet.RESTConfig(cluster)
		Expect(err).NotTo(HaveOccurred())
		exposition, err := apimetrics.Scrape(ctx, cfg)
		Expect(err).NotTo(HaveOccurred())
		keep := func(resource string) bool {
			return resource == "endpointslices" || resource == "serviceimports" || resource == "serviceexports"
		}
		if cluster == clusterSet.Broker {
			keep = func(resource string) bool { return resource != "leases" }
		}
		out[cluster], err = apimetrics.CountWrites(exposition, keep)
		Expect(err).NotTo(HaveOccurred())
	}
	return out
}
