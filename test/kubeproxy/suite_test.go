// Package kubeproxy sends real packets across a local ClusterSet whose Nodes run stock
// kube-proxy (nftables mode) and no fleetslice agent: a cluster that keeps kube-proxy gets
// ClusterSet IPs from the derived Services and imported EndpointSlices the multi-cluster
// controllers write, and nothing else. It runs as root with ip, nsenter, socat and nft, and
// kube-proxy built by `make kube-proxy`; elsewhere it skips and says why (CI requires it to run).
package kubeproxy

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

var (
	clusterSet *localset.ClusterSet
	network    *localset.PodNetwork
	kubeProxy  string
	binDir     string
	stops      []func() error
)

func TestKubeProxy(t *testing.T) {
	missing := localset.PodNetworkMissing()
	for _, bin := range []string{"socat", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, "the "+bin+" binary in PATH")
		}
	}
	var err error
	if kubeProxy, err = k8sbin.Path(k8sbin.KubeProxy); err != nil {
		missing = append(missing, "the kube-proxy binary (make kube-proxy)")
	}
	testutil.RequireKernel(t, "the kube-proxy data path suite", missing)
	RegisterFailHandler(Fail)
	RunSpecs(t, "kube-proxy beside fleetslice, without the agent")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	var err error
	binDir, err = localsettest.BuildBinaries(ctx, "manager")
	Expect(err).NotTo(HaveOccurred())

	workdir, err := os.MkdirTemp("", "fleetslice-kubeproxy-")
	Expect(err).NotTo(HaveOccurred())
	// The smallest ClusterSet that has an elsewhere: two members of one Node each.
	clusterSet, err = localset.Up(ctx, localset.Options{Workdir: workdir, Clusters: 2, NodesPerCluster: 1,
		PodNetwork: true, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	for _, m := range clusterSet.Members {
		p, err := clusterSet.StartManager(m, binDir)
		Expect(err).NotTo(HaveOccurred())
		stops = append(stops, func() error { return p.Stop(10 * time.Second) })
	}
	var opts []localset.PodNetworkOption
	for _, m := range clusterSet.Members {
		opts = append(opts, localset.WithKubeProxy(m, kubeProxy))
	}
	network, err = clusterSet.StartPodNetwork(context.WithoutCancel(ctx), binDir, GinkgoWriter, opts...)
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	Expect(localsettest.Teardown(ctx, network, stops, clusterSet, binDir, GinkgoWriter)).To(Succeed())
}, NodeTimeout(3*time.Minute))
