// Package managed runs fleetslice the way a managed control plane (EKS, GKE, AKS) forces it to
// run: kube-controller-manager's own EndpointSlice controller stays on, and the manager binary
// serves only the Services opted in with the fleetslice.io/selector annotation
// (--endpointslice-services=opted-in). The member's API server audits every EndpointSlice write,
// so the suite can tell which controller wrote each slice.
package managed

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetslice/fleetslice/internal/localset"
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
	binDir, err = os.MkdirTemp("", "fleetslice-managed-bin-")
	Expect(err).NotTo(HaveOccurred())
	out, err := exec.CommandContext(ctx, "go", "build", "-o", binDir, "github.com/fleetslice/fleetslice/cmd/manager").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "building the manager: %s", out)

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
	if manager != nil {
		Expect(manager.Stop(10 * time.Second)).To(Succeed())
	}
	if clusterSet != nil {
		Expect(localset.Remove(context.WithoutCancel(ctx), clusterSet.Workdir, GinkgoWriter)).To(Succeed())
	}
	if binDir != "" {
		Expect(os.RemoveAll(binDir)).To(Succeed())
	}
}, NodeTimeout(3*time.Minute))
