// Package install_test runs fleetslice as a platform team installs it: dist/broker.yaml on a
// broker, dist/install.yaml on one member and the Helm chart's render on another, both joined
// with kubectl fleetslice join, then the manager and agent from their images, each in a network namespace
// of its own and authenticated only as its installed ServiceAccount, started with exactly the
// command and arguments of the installed Deployment and DaemonSet. The members' API servers
// enforce OwnerReferencesPermissionEnforcement, so an RBAC rule the markers forget fails here.
package install_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/netns"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
	"github.com/fleetslice/fleetslice/internal/ops/join"
	"github.com/fleetslice/fleetslice/internal/release/image"
	"github.com/fleetslice/fleetslice/internal/release/installer"
)

var (
	brokerEnv *testenv.Cluster
	// fromYAML is installed from dist/install.yaml, fromChart from the chart's render.
	fromYAML, fromChart *installedMember
	// images are the unpacked root filesystems of the two images, copied per process.
	managerRootFS, agentRootFS string
)

func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both images and runs three control planes")
	}
	missing := netns.Missing()
	for _, bin := range []string{"chroot", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, "the "+bin+" binary in PATH")
		}
	}
	testutil.RequireKernel(t, "running the installed manager and agent from their images", missing)
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "fleetslice as installed")
}

func repoRoot() string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	return root
}

var _ = BeforeSuite(func(ctx context.Context) {
	root := repoRoot()
	buildImages(ctx, root)

	property, err := crds.ClusterProperty()
	Expect(err).NotTo(HaveOccurred())
	brokerEnv, err = testenv.Start("broker")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(brokerEnv.Stop)
	brokerObjs := decodeFile(filepath.Join(root, "dist", "broker.yaml"))
	apply(ctx, brokerEnv.Client, brokerObjs)

	helm, err := k8sbin.Path(k8sbin.Helm)
	Expect(err).NotTo(HaveOccurred())
	// The agent replaces kube-proxy, so it is given the API server's own address, as a platform
	// team gives it: install.yaml as `installer --agent-api-server` writes it (the shipped file
	// and SetAgentAPIServer, the flag's whole effect), the chart with agent.apiServer.
	fromDist := func(apiServer string) []*unstructured.Unstructured {
		objs := decodeFile(filepath.Join(root, "dist", "install.yaml"))
		Expect(installer.SetAgentAPIServer(objs, apiServer)).To(Succeed())
		return objs
	}
	fromHelm := func(apiServer string) []*unstructured.Unstructured {
		rendered, err := exec.Command(helm, "template", "fleetslice", filepath.Join(root, "dist", "chart"),
			"--namespace", installer.Namespace, "--include-crds", "--set-string", "agent.apiServer="+apiServer).Output()
		Expect(err).NotTo(HaveOccurred())
		objs, err := installer.Decode(rendered)
		Expect(err).NotTo(HaveOccurred())
		return objs
	}

	for _, spec := range []struct {
		target **installedMember
		id     string
		objs   func(apiServer string) []*unstructured.Unstructured
	}{{&fromYAML, "yaml", fromDist}, {&fromChart, "chart", fromHelm}} {
		env, err := testenv.StartWithAdmission("member-"+spec.id, []string{"OwnerReferencesPermissionEnforcement"}, property...)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(env.Stop)
		apiServer, err := url.Parse(env.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		objs := spec.objs(apiServer.Host)
		apply(ctx, env.Client, objs)
		Expect(join.Join(ctx, join.Options{Broker: brokerEnv.Config, Member: env.Config, ClusterID: spec.id})).To(Succeed())
		m := &installedMember{id: spec.id, env: env, objs: objs}
		*spec.target = m
		m.start(ctx)
		DeferCleanup(m.stop)
	}
})

// buildImages builds and unpacks the manager and agent images once for the suite.
func buildImages(ctx context.Context, root string) {
	meta, err := image.GitMeta(root)
	Expect(err).NotTo(HaveOccurred())
	out := GinkgoT().TempDir()
	b := image.Build{Root: root, OutDir: out, ManagerRef: "example.test/manager:e2e", AgentRef: "example.test/agent:e2e",
		Meta: meta}
	results, err := b.Run(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, r := range results {
		img, _, cleanup, err := image.ReadOCIArchive(r.Path)
		Expect(err).NotTo(HaveOccurred())
		dir := filepath.Join(out, r.Name+"-rootfs")
		Expect(image.Unpack(img, dir)).To(Succeed())
		cleanup()
		switch r.Name {
		case "manager":
			managerRootFS = dir
		case "agent":
			agentRootFS = dir
		}
	}
}

func decodeFile(path string) []*unstructured.Unstructured {
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	objs, err := installer.Decode(data)
	Expect(err).NotTo(HaveOccurred())
	return objs
}

// apply writes objects with server-side apply, as kubectl apply --server-side does; CRDs the
// test control plane already serves are taken over.
func apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) {
	for _, obj := range objs {
		obj = obj.DeepCopy()
		Expect(c.Patch(ctx, obj, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership)).
			To(Succeed(), "applying %s %s", obj.GetKind(), obj.GetName())
	}
}

// forbidden lists the log lines of a process that mention a refused request.
func forbidden(log string) []string {
	var lines []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			lines = append(lines, line)
		}
	}
	return lines
}
