// Package datapath sends real packets across a local ClusterSet: Pods of one member reach
// Services exported from another by ClusterSet IP and clusterset.local name, through the real
// node agents' nftables rules in each Node's network namespace (package podnet). It runs as root
// with ip, nsenter and socat; elsewhere it skips and says why (CI requires it to run).
package datapath

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

var (
	clusterSet *localset.ClusterSet
	network    *localset.PodNetwork
	binDir     string
	stops      []func() error
	// processes are the managers and DNS servers, whose logs a failed spec carries (with the
	// agents', network.Agents).
	processes []*localset.Process
)

func TestDatapath(t *testing.T) {
	missing := localset.PodNetworkMissing()
	for _, bin := range []string{"socat", "unshare", "curl"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, "the "+bin+" binary in PATH")
		}
	}
	testutil.RequireKernel(t, "the cross-cluster data path suite", missing)
	RegisterFailHandler(Fail)
	RunSpecs(t, "packets across a local ClusterSet")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	// Without this, an Eventually given the spec's context waits until the spec times out.
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	var err error
	binDir, err = localsettest.BuildBinaries(ctx, "manager", "agent", "fleetslice-dns")
	Expect(err).NotTo(HaveOccurred())

	workdir, err := os.MkdirTemp("", "fleetslice-datapath-")
	Expect(err).NotTo(HaveOccurred())
	clusterSet, err = localset.Up(ctx, localset.Options{Workdir: workdir, Clusters: 2, NodesPerCluster: 3, DNS: true, PodNetwork: true,
		// Members of unequal size: cluster-2's clients spill some of the PreferSameCluster samples'
		// traffic to cluster-1, which the samples spec checks in counted requests.
		CPUScale: map[string]int{localset.MemberName(2): 2}, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	for _, m := range clusterSet.Members {
		p, err := clusterSet.StartManager(m, binDir)
		Expect(err).NotTo(HaveOccurred())
		stops = append(stops, func() error { return p.Stop(10 * time.Second) })
		processes = append(processes, p)
		d, err := clusterSet.StartDNS(ctx, m, binDir)
		if d != nil {
			stops = append(stops, func() error { return d.Stop(10 * time.Second) })
			processes = append(processes, d)
		}
		Expect(err).NotTo(HaveOccurred())
	}
	network, err = clusterSet.StartPodNetwork(context.WithoutCancel(ctx), binDir, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

// A failed spec carries the end of every manager's, agent's and DNS server's log: a packet that
// went astray (a refused connection, a wrong endpoint) is explained by what those decided at the
// time, and the workdir holding the logs is gone once the suite stops.
var _ = AfterEach(func() {
	if !CurrentSpecReport().Failed() {
		return
	}
	all := slices.Clone(processes)
	if network != nil {
		for _, node := range slices.Sorted(maps.Keys(network.Agents)) {
			all = append(all, network.Agents[node])
		}
	}
	for _, p := range all {
		AddReportEntry("the end of "+p.Name+"'s log", p.Describe(40))
	}
})

var _ = AfterSuite(func(ctx SpecContext) {
	Expect(localsettest.Teardown(ctx, network, stops, clusterSet, binDir, GinkgoWriter)).To(Succeed())
}, NodeTimeout(3*time.Minute))
