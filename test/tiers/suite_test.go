// Package tiers runs locality in tiers (KEP-5939 cluster selectors with fleetslice's bounded
// spill, issue #39) end to end on a local ClusterSet: three members in two regions, each with
// the real manager binary at its defaults and a real dry-run node agent whose rendered ruleset
// the specs read. Where the machine has the real data path (root, ip, nsenter, socat and nft:
// package podnet), every Node also runs the real agent programming nftables in its network
// namespace, and each step's shares are checked again in what that agent programmed and in
// requests counted from a client Pod of every member; without it those checks are skipped
// and say why, unless FLEETSLICE_REQUIRE_KERNEL_TESTS=1 (CI) makes that a failure.
package tiers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// regionProperty is the ClusterProperty the selectors compare (KEP-5939's example name; a
// ClusterProperty name cannot hold the "/" of the Node label topology.kubernetes.io/region).
const regionProperty = "region.topology.k8s.io"

var (
	clusterSet *localset.ClusterSet
	binDir     string
	clients    = map[string]client.Client{}
	// regions: cluster-1 and cluster-2 in region-a, cluster-3 in region-b.
	regions = map[string]string{}
	// processes are the managers and agents, stopped in AfterSuite.
	processes []*localset.Process
	// agents maps each member to its dry-run agent's ruleset file.
	agents = map[string]agentRun{}
	// network is the real data path, nil when noNetwork says why the machine cannot run it.
	network   *localset.PodNetwork
	noNetwork string
)

type agentRun struct {
	node, ruleset string
	p             *localset.Process
}

func TestTiers(t *testing.T) {
	missing := localset.PodNetworkMissing()
	for _, bin := range []string{"socat", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, "the "+bin+" binary in PATH")
		}
	}
	if len(missing) > 0 {
		noNetwork = "the real data path's checks (the real agents' nftables and counted requests) need " + strings.Join(missing, " and ")
		if os.Getenv(testutil.RequireKernelEnv) == "1" {
			t.Fatal(noNetwork + " (" + testutil.RequireKernelEnv + "=1 forbids skipping them)")
		}
		t.Log(noNetwork + ": skipping them, the shares are checked in the dry-run agents' rules only")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "locality in tiers on a local ClusterSet")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	// Without this, an Eventually given the spec's context waits until the spec times out.
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	var err error
	binDir, err = localsettest.BuildBinaries(ctx, "manager", "agent")
	Expect(err).NotTo(HaveOccurred())
	workdir, err := os.MkdirTemp("", "fleetslice-tiers-")
	Expect(err).NotTo(HaveOccurred())
	// One 8-CPU Node per member: the members' clients send equal thirds of the traffic.
	clusterSet, err = localset.Up(ctx, localset.Options{Workdir: workdir, Clusters: 3, NodesPerCluster: 1,
		Zones: []localset.Zone{{Name: "zone-a", Region: "region-1", NodeCPUs: 8}}, PodNetwork: noNetwork == "", Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	for i, m := range clusterSet.Members {
		clients[m], err = clusterSet.Client(m)
		Expect(err).NotTo(HaveOccurred())
		regions[m] = map[bool]string{true: "region-a", false: "region-b"}[i < 2]
		Expect(clients[m].Create(ctx, property(regionProperty, regions[m]))).To(Succeed())
	}
	for _, m := range clusterSet.Members {
		p, err := clusterSet.StartManager(m, binDir)
		Expect(err).NotTo(HaveOccurred())
		processes = append(processes, p)
		node := clusterSet.AgentNodes(m)[0]
		run := agentRun{node: node, ruleset: filepath.Join(workdir, node+".nft")}
		// Named apart from the real agent the pod network runs on the same Node, which logs to
		// agent-<node>.log: the two only read the API, and this one writes its rules to a file.
		run.p, err = clusterSet.StartProcess("dry-run-agent-"+node, filepath.Join(binDir, "agent"),
			"--kubeconfig", clusterSet.Kubeconfig, "--context", localset.Context(m), "--node-name", node,
			"--dataplane=dry-run", "--dry-run-output", run.ruleset, "--ip-families=IPv4",
			"--metrics-bind-address=0", "--health-probe-bind-address=0")
		Expect(err).NotTo(HaveOccurred())
		processes = append(processes, run.p)
		agents[m] = run
	}
	if noNetwork == "" {
		network, err = clusterSet.StartPodNetwork(context.WithoutCancel(ctx), binDir, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
	}
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	stops := make([]func() error, 0, len(processes))
	for _, p := range processes {
		stops = append(stops, func() error { return p.Stop(10 * time.Second) })
	}
	Expect(localsettest.Teardown(context.WithoutCancel(ctx), network, stops, clusterSet, binDir, GinkgoWriter)).To(Succeed())
}, NodeTimeout(3*time.Minute))

func property(name, value string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(clusterid.GroupVersionKind)
	p.SetName(name)
	Expect(unstructured.SetNestedField(p.Object, value, "spec", "value")).To(Succeed())
	return p
}
