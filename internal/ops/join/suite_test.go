package join_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
	"github.com/fleetslice/fleetslice/internal/release/installer"
)

var (
	brokerEnv        *testenv.Cluster
	memberA, memberB *testenv.Cluster
)

func TestJoin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fleetslice join and leave")
}

// The broker gets dist/broker.yaml, as a platform team applies it; the members get the
// namespace dist/install.yaml creates and the CRDs it carries.
var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	brokerEnv, err = testenv.Start("broker")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(brokerEnv.Stop)
	manifest, err := os.ReadFile(filepath.Join("..", "..", "..", "dist", "broker.yaml"))
	Expect(err).NotTo(HaveOccurred())
	objs, err := installer.Decode(manifest)
	Expect(err).NotTo(HaveOccurred())
	for _, obj := range objs {
		Expect(brokerEnv.Client.Create(ctx, obj)).To(Succeed(), "creating %s %s", obj.GetKind(), obj.GetName())
	}

	property, err := crds.ClusterProperty()
	Expect(err).NotTo(HaveOccurred())
	for _, m := range []**testenv.Cluster{&memberA, &memberB} {
		*m, err = testenv.StartWith("member", property...)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup((*m).Stop)
		Expect((*m).Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleetslice-system"}})).To(Succeed())
	}
})
