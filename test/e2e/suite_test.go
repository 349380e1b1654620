// Package e2e runs fleetslice against a local ClusterSet of kwok-simulated clusters, brought up
// once for the whole suite.
package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

var (
	clusterSet      *localset.ClusterSet
	stopControllers []context.CancelFunc
)

// startControllers runs fleetslice's controllers (EndpointSlice and multi-cluster services) in
// this process against one member, as the manager binary would.
func startControllers(member string) {
	cfg, err := clusterSet.RESTConfig(member)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     localset.Scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      endpointslice.CacheOptions(),
	})
	Expect(err).NotTo(HaveOccurred())
	r, err := endpointslice.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("endpointslice-controller"), endpointslice.DefaultOptions())
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	stopControllers = append(stopControllers, cancel)
	Expect(r.SetupWithManager(ctx, mgr)).To(Succeed())
	// Multi-cluster services, as the manager runs them with --broker-kubeconfig.
	mcs := multicluster.DefaultOptions()
	mcs.BrokerKubeconfig, mcs.LeaseDuration = clusterSet.BrokerKubeconfig(member), 10*time.Second
	Expect(multicluster.Setup(ctx, mgr, mcs)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "local ClusterSet e2e suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	workdir, err := os.MkdirTemp("", "fleetslice-e2e-")
	Expect(err).NotTo(HaveOccurred())
	clusterSet, err = localset.Up(ctx, localset.Options{
		Workdir:         workdir,
		Clusters:        2,
		NodesPerCluster: 9,
		// Members of unequal size for the locality spec: cluster-2's Nodes have twice the CPU.
		CPUScale: map[string]int{localset.MemberName(2): 2},
		DNS:      true,
		Log:      GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
	for _, member := range clusterSet.Members {
		startControllers(member)
	}
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	for _, stop := range stopControllers {
		stop()
	}
	if clusterSet == nil {
		return
	}
	Expect(localset.Remove(context.Background(), clusterSet.Workdir, GinkgoWriter)).To(Succeed())
})
