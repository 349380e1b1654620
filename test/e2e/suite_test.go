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

	"github.com/fleetslice/fleetslice/internal/localset"
)

var clusterSet *localset.ClusterSet

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "local ClusterSet e2e suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	workdir, err := os.MkdirTemp("", "fleetslice-e2e-")
	Expect(err).NotTo(HaveOccurred())
	clusterSet, err = localset.Up(ctx, localset.Options{
		Workdir:         workdir,
		Clusters:        2,
		NodesPerCluster: 9,
		Log:             GinkgoWriter,
	})
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	if clusterSet == nil {
		return
	}
	Expect(localset.Down(context.Background(), clusterSet.Workdir, GinkgoWriter)).To(Succeed())
	Expect(localset.ProcessesUnder(clusterSet.Workdir)).To(BeEmpty(), "down must leave no process behind")
	Expect(os.RemoveAll(clusterSet.Workdir)).To(Succeed())
})
