package multicluster_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

const (
	brokerNamespace = broker.DefaultNamespace
	// Short leases keep the lease tests fast; renewals every second.
	leaseDuration = 3 * time.Second
	renewInterval = time.Second
)

// member is one member cluster with its controllers running in this process. The suite runs on
// the public harness its users get, so the harness cannot rot unnoticed.
type member = clustersettest.Member

var (
	clusterSet *clustersettest.ClusterSet
	members    []*member
	a, b, c    *member
)

func TestMulticluster(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyPollingInterval(250 * time.Millisecond)
	RunSpecs(t, "multicluster suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	var err error
	clusterSet, err = clustersettest.Start(ctx, clustersettest.Options{
		Members:         []string{"a", "b", "c"},
		BrokerNamespace: brokerNamespace,
		LeaseDuration:   leaseDuration,
		RenewInterval:   renewInterval,
		// a finds its id in its ClusterProperty, b and c are given theirs by flag.
		IDsByFlag: []string{"b", "c"},
		// The specs write the exporters' EndpointSlices themselves, as a member's own
		// EndpointSlice controller would.
		WithoutEndpointSliceController: true,
		// The lease specs partition members from the broker.
		CuttableBrokerLinks: true,
		Logger:              logger,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(clusterSet.Stop)
	members = clusterSet.Members
	a, b, c = members[0], members[1], members[2]
}, NodeTimeout(5*time.Minute))

// leaveOnShutdown makes a member delete its broker objects when its controllers stop.
func leaveOnShutdown(o *multicluster.Options) { o.LeaveOnShutdown = true }
