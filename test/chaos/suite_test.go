// Package chaos injects faults into a local ClusterSet that runs fleetslice's real manager and
// agent processes: managers killed mid-rollout, API servers restarted over a compacted etcd,
// writes failing, the broker down, a member cut off, a leader lost. After each fault it checks
// from the API that nothing was lost or duplicated, and it records a row per fault for
// docs/reliability.md. `make test` runs the quick variant; `make chaos` the full one
// (FLEETSLICE_CHAOS=full: a 1,000-Pod rollout and a 60 s broker outage).
package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

// sizes are what one variant of the suite injects.
type sizes struct {
	// RolloutPods is the size of the Deployment rolled while a fault strikes.
	RolloutPods int
	// OtherPods is the size of the Deployment behind the Service exported from the second member.
	OtherPods int
	// SteadyPods back a Service that no fault may ever disturb.
	SteadyPods int
	// BrokerOutage is how long the broker stays down.
	BrokerOutage time.Duration
	// Lease is every manager's --cluster-lease-duration: how long a member may stay silent
	// before the others withdraw its endpoints.
	Lease time.Duration
	// NodesPerCluster must hold RolloutPods plus its surge (250 Pods a Node).
	NodesPerCluster int
	// Settle bounds the wait for the invariants after a fault.
	Settle time.Duration
}

var (
	quick = sizes{RolloutPods: 60, OtherPods: 20, SteadyPods: 8, BrokerOutage: 15 * time.Second,
		Lease: 15 * time.Second, NodesPerCluster: 3, Settle: 3 * time.Minute}
	full = sizes{RolloutPods: 1000, OtherPods: 200, SteadyPods: 20, BrokerOutage: 60 * time.Second,
		Lease: 15 * time.Second, NodesPerCluster: 9, Settle: 10 * time.Minute}
)

var (
	size       = quick
	clusterSet *localset.ClusterSet
	binDir     string
	fleet      []*member
	steady     *steadyWatch
	rows       []row
	// failures are the failed specs' messages.
	failures []string
)

func TestChaos(t *testing.T) {
	if os.Getenv("FLEETSLICE_CHAOS") == "full" {
		size = full
	}
	RegisterFailHandler(Fail)
	if !RunSpecs(t, "fault injection on a local ClusterSet") {
		// Repeated last, where a CI log's tail shows them: above, they sit among the processes' logs.
		for _, f := range failures {
			fmt.Println(f)
		}
	}
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	binDir, err = os.MkdirTemp("", "fleetslice-chaos-bin-")
	Expect(err).NotTo(HaveOccurred())
	build := exec.CommandContext(ctx, "go", "build", "-o", binDir,
		"github.com/fleetslice/fleetslice/cmd/manager", "github.com/fleetslice/fleetslice/cmd/agent")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building the manager and agent: %s", out)

	workdir, err := os.MkdirTemp("", "fleetslice-chaos-")
	Expect(err).NotTo(HaveOccurred())
	clusterSet, err = localset.Up(ctx, localset.Options{
		Workdir: workdir, Clusters: 2, NodesPerCluster: size.NodesPerCluster, Log: GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(os.MkdirAll(filepath.Join(workdir, "rulesets"), 0o755)).To(Succeed())
	for _, name := range clusterSet.Members {
		m, err := newMember(ctx, name)
		Expect(err).NotTo(HaveOccurred())
		fleet = append(fleet, m)
		Expect(m.startReplica(nil)).To(Succeed())
		Expect(m.startAgent()).To(Succeed())
	}
	Expect(createWorkloads(ctx)).To(Succeed())
	start := time.Now()
	settled(ctx, start)
	fmt.Fprintf(GinkgoWriter, "workloads settled in %s\n", time.Since(start).Round(100*time.Millisecond))
	steady, err = watchSteady(ctx)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(15*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	if steady != nil {
		steady.stop()
	}
	for _, m := range fleet {
		m.stop()
	}
	writeReport(rows)
	if clusterSet != nil {
		Expect(localset.Remove(ctx, clusterSet.Workdir, GinkgoWriter)).To(Succeed())
	}
	if binDir != "" {
		Expect(os.RemoveAll(binDir)).To(Succeed())
	}
}, NodeTimeout(3*time.Minute))

// memberNamed finds a member of the fleet.
func memberNamed(name string) *member {
	for _, m := range fleet {
		if m.name == name {
			return m
		}
	}
	Fail("no member " + name)
	return nil
}

// A failed spec shows the end of every fleetslice process's log: the workdir is gone afterwards.
var _ = ReportAfterEach(func(report SpecReport) {
	if !report.Failed() {
		return
	}
	failures = append(failures, fmt.Sprintf("FAILED %q at %s: %s", report.LeafNodeText, report.Failure.Location, report.Failure.Message))
	for _, m := range fleet {
		for _, r := range m.replicas {
			if p := r.running(); p != nil {
				fmt.Fprintln(GinkgoWriter, p.Describe(30))
			}
		}
		if m.agent != nil {
			fmt.Fprintln(GinkgoWriter, m.agent.Describe(10))
		}
	}
})
