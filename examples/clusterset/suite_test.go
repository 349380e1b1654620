// Package clusterset_test is an example of a team's envtest suite on pkg/clustersettest: it
// starts one in-process ClusterSet for the whole suite and gives each spec its own namespace.
// Copy it into your repository as a starting point; it needs only KUBEBUILDER_ASSETS (a
// directory holding etcd and kube-apiserver, as for controller-runtime's envtest).
package clusterset_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

var (
	clusterSet *clustersettest.ClusterSet
	// east and west are the two member clusters.
	east, west *clustersettest.Member
)

func TestClusterSet(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	RunSpecs(t, "ClusterSet example suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	var err error
	clusterSet, err = clustersettest.Start(ctx, clustersettest.Options{
		Members: []string{"east", "west"},
		Logger:  logger,
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(clusterSet.Stop)
	GinkgoWriter.Printf("ClusterSet of 2 members ready in %s\n", clusterSet.StartedIn)
	east, west = clusterSet.Member("east"), clusterSet.Member("west")
}, NodeTimeout(3*time.Minute))
