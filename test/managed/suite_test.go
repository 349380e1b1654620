// Package managed runs fleetslice the way a managed control plane (EKS, GKE, AKS) forces it to
// run: kube-controller-manager's own EndpointSlice controller stays on, and the manager binary
// serves only the Services opted in with the fleetslice.io/selector annotation
// (--endpointslice-services=opted-in). The member's API server audits every EndpointSlice write,
// so the suite can tell which controller wrote each slice.
package managed

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
)

var (
	clusterSet *localset.ClusterSet
	member     string
	k8s        client.Client
	manager    *localset.Process
	binDir     string
)

func TestManagedControlPlane(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fleetslice beside kube-controller-manager's EndpointSlice controller")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	EnforceDefaultTimeoutsWhenUsingContexts()
	SetDefaultEventuallyTimeout(time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	var err error
	binDir, err = localsettest.BuildBinaries(ctx, "manager")
	Expect(err).NotTo(HaveOccurred())

	workdir, err := os.MkdirTemp("", "fleetslice-managed-")
	Expect(err).NotTo(HaveOccurred())
	member = localset.MemberName(1)
	clusterSet, err = localset.Up(ctx, localset.Options{Workdir: workdir, Clusters: 1, NodesPerCluster: 3,
		UpstreamEndpointSlices: []string{member}, AuditEndpointSliceWrites: true, Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = clusterSet.Client(member)
	Expect(err).NotTo(HaveOccurred())
	manager, err = clusterSet.StartManager(member, binDir, "--endpointslice-services=opted-in")
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func(ctx SpecContext) {
	var stops []func() error
	if manager != nil {
		stops = append(stops, func() error { return manager.Stop(10 * time.Second) })
	}
	Expect(localsettest.Teardown(context.WithoutCancel(ctx), nil, stops, clusterSet, binDir, GinkgoWriter)).To(Succeed())
}, NodeTimeout(3*time.Minute))
