package endpointslice_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

var (
	cluster   *testenv.Cluster
	k8sClient client.Client
	stopMgr   context.CancelFunc
	// maxPerSlice is small so a few Pods exercise multi-slice behaviour.
	maxPerSlice = 5
)

func TestEndpointSliceController(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "EndpointSlice controller suite")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	cluster, err = testenv.Start("endpointslice")
	Expect(err).NotTo(HaveOccurred())
	k8sClient = cluster.Client

	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{
		Scheme:  k8sClient.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		// The specs run through the trimmed cache the manager binary uses.
		Cache: endpointslice.CacheOptions(),
	})
	Expect(err).NotTo(HaveOccurred())
	opts := endpointslice.DefaultOptions()
	opts.MaxEndpointsPerSlice = maxPerSlice
	opts.AdoptUpstreamSlices = true
	r, err := endpointslice.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("endpointslice-controller"), opts)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	stopMgr = cancel
	Expect(r.SetupWithManager(ctx, mgr)).To(Succeed())
	Expect(endpointslice.ReadsPodsInPlace(r)).To(BeTrue(), "the manager's cache hands out no Pod index")
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
	}
	Expect(cluster.Stop()).To(Succeed())
})
