package agent_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// scriptedDrift is a dry-run dataplane whose drift checks report what the spec queued, once
// each, and no drift otherwise.
type scriptedDrift struct {
	*dataplane.DryRun
	mu     sync.Mutex
	queued []dataplane.Drift
	checks int
}

func (s *scriptedDrift) CheckDrift(context.Context) (dataplane.DriftCheck, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks++
	if len(s.queued) == 0 {
		return dataplane.DriftCheck{Family: "ip"}, nil
	}
	d := s.queued[0]
	s.queued = s.queued[1:]
	return dataplane.DriftCheck{Family: "ip", Listed: true, Drift: &d}, nil
}

func (s *scriptedDrift) checkCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checks
}

func (s *scriptedDrift) queue(d dataplane.Drift) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued = append(s.queued, d)
}

func fullSyncs(reports []agent.Report) int {
	n := 0
	for _, r := range reports {
		if r.Full {
			n++
		}
	}
	return n
}

var _ = Describe("the node agent's drift checks", func() {
	It("counts each drift once, repairs it with a full sync at once, and counts nothing while the table is intact", func() {
		dp := &scriptedDrift{DryRun: dryRun()}
		a := startAgent(newNode("zone-a"), []agent.Dataplane{dp}, func(o *agent.Options) {
			o.DriftCheckPeriod = 20 * time.Millisecond
			o.SyncPeriod = time.Hour
		})
		Eventually(a.Ready).Should(Succeed())
		missing := map[string]string{"kind": dataplane.DriftTableMissing}
		changed := map[string]string{"kind": dataplane.DriftContentChanged}
		missing0, changed0 := metricValue(agent.MetricTableDrift, missing), metricValue(agent.MetricTableDrift, changed)

		By("checking while nothing drifts: no drift counted and no rebuild")
		start, checks := a.count(), dp.checkCount()
		Eventually(dp.checkCount).Should(BeNumerically(">=", checks+5))
		Expect(fullSyncs(a.since(start))).To(BeZero())
		Expect(metricValue(agent.MetricTableDrift, missing)).To(Equal(missing0))
		Expect(metricValue(agent.MetricTableDrift, changed)).To(Equal(changed0))

		By("a check that finds the table gone")
		start = a.count()
		dp.queue(dataplane.Drift{Kind: dataplane.DriftTableMissing, Detail: "table fleetslice is gone"})
		Eventually(func() int { return fullSyncs(a.since(start)) }).Should(Equal(1))
		Expect(metricValue(agent.MetricTableDrift, missing)).To(Equal(missing0 + 1))
		checks = dp.checkCount()
		Eventually(dp.checkCount).Should(BeNumerically(">=", checks+5))
		Expect(fullSyncs(a.since(start))).To(Equal(1), "one rebuild per drift")
		Expect(metricValue(agent.MetricTableDrift, missing)).To(Equal(missing0+1), "counted once")
		Expect(metricValue(agent.MetricTableDrift, changed)).To(Equal(changed0))
	})
})
