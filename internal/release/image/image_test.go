package image

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// buildImages builds the three images for this machine's platform into out. Cross-compiled
// indexes are built by TestDocumentedImageCommands (internal/release/installer), and an index of equal
// images is byte-identical (TestIndexArchiveHoldsEveryPlatform), so building every platform twice
// here would only add minutes.
func buildImages(t *testing.T, root, out string, meta Meta) []Result {
	t.Helper()
	b := Build{
		Root: root, OutDir: out,
		ManagerRef: "example.test/fleetslice/manager:v1", AgentRef: "example.test/fleetslice/agent:v1",
		DNSRef: "example.test/fleetslice/dns:v1", Meta: meta,
	}
	started := time.Now()
	results, err := b.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d images in %s", len(results), time.Since(started).Round(time.Second))
	return results
}

// TestImagesAreReproducibleAndRunFromTheirRootFS builds the images twice (same digests), then
// runs each entrypoint of this machine's platform from its unpacked root filesystem with chroot,
// as a runtime would: the manager prints its version and flags as a non-root image; the agent,
// its binary alone, programs its table over netlink in a network namespace of the test's, from
// an API server, and --cleanup removes it.
func TestImagesAreReproducibleAndRunFromTheirRootFS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both images")
	}
	testutil.RequireKernel(t, "running the images' entrypoints with chroot in a network namespace", chrootMissing())
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	// Read once: a commit landing between the two builds must not make them differ.
	meta, err := GitMeta(root)
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	first := buildImages(t, root, t.TempDir(), meta)
	second := buildImages(t, root, t.TempDir(), meta)
	for i := range first {
		t.Logf("%s: %s, %v bytes compressed for %v", first[i].Name, first[i].Digest, first[i].Sizes, first[i].Platforms)
		if first[i].Digest != second[i].Digest {
			t.Errorf("%s: two builds of one commit gave %s and %s", first[i].Name, first[i].Digest, second[i].Digest)
		}
		a, _ := os.ReadFile(first[i].Path)
		b, _ := os.ReadFile(second[i].Path)
		if string(a) != string(b) {
			t.Errorf("%s: the two archives differ byte for byte", first[i].Name)
		}
	}
	t.Run("manager", func(t *testing.T) { checkManager(t, first[0].Path) })
	t.Run("agent", func(t *testing.T) { checkAgent(t, first[1].Path) })
	t.Run("fleetslice-dns", func(t *testing.T) { checkDNS(t, first[2].Path) })
}

func chrootMissing() []string {
	missing := netns.Missing()
	// nft only reads the table back; the agent in the image programs it without nft.
	for _, bin := range []string{"chroot", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, "the "+bin+" binary in PATH")
		}
	}
	return missing
}

// unpackArchive unpacks the image of this machine's platform and checks that the image holds only
// its entrypoint binary.
func unpackArchive(t *testing.T, path, wantRef, entrypoint string) (rootfs string, cfgUser string, env []string) {
	t.Helper()
	img, ref, cleanup, err := ReadOCIArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if ref != wantRef {
		t.Errorf("archive is tagged %q, want %q", ref, wantRef)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	rootfs = t.TempDir()
	if err := Unpack(img, rootfs); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || "/"+entries[0].Name() != entrypoint {
		t.Errorf("%s holds %v, want only %s", wantRef, entries, entrypoint)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{entrypoint}) {
		t.Errorf("%s runs %v, want %s", wantRef, cf.Config.Entrypoint, entrypoint)
	}
	return rootfs, cf.Config.User, cf.Config.Env
}

func checkManager(t *testing.T, path string) {
	rootfs, user, _ := unpackArchive(t, path, "example.test/fleetslice/manager:v1", "/manager")
	if user != NonRootUser {
		t.Errorf("manager image runs as %q, want %q", user, NonRootUser)
	}
	out, err := exec.Command("chroot", "--userspec="+NonRootUser, rootfs, "/manager", "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "fleetslice manager ") {
		t.Errorf("/manager --version as %s: %v: %s", NonRootUser, err, out)
	}
	out, _ = exec.Command("chroot", rootfs, "/manager", "--help").CombinedOutput()
	for _, flag := range []string{"-max-endpoints-per-slice", "-broker-kubeconfig", "-leader-elect"} {
		if !strings.Contains(string(out), flag) {
			t.Errorf("/manager --help does not list %s:\n%s", flag, out)
		}
	}
}

func checkDNS(t *testing.T, path string) {
	rootfs, user, _ := unpackArchive(t, path, "example.test/fleetslice/dns:v1", "/fleetslice-dns")
	if user != NonRootUser {
		t.Errorf("fleetslice-dns image runs as %q, want %q", user, NonRootUser)
	}
	out, err := exec.Command("chroot", "--userspec="+NonRootUser, rootfs, "/fleetslice-dns", "-plugins").CombinedOutput()
	if err != nil || !slices.Contains(strings.Fields(string(out)), "clusterset") {
		t.Errorf("/fleetslice-dns -plugins as %s does not list the clusterset plugin: %v: %s", NonRootUser, err, out)
	}
}

func checkAgent(t *testing.T, path string) {
	rootfs, user, env := unpackArchive(t, path, "example.test/fleetslice/agent:v1", "/agent")
	if user != "" {
		t.Errorf("agent image runs as %q, want root (netlink needs CAP_NET_ADMIN)", user)
	}
	if err := AddDevNull(rootfs); err != nil {
		t.Fatal(err)
	}
	cluster, err := testenv.Start("image")
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	ns, err := netns.Create("fsimage")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	apiURL, err := url.Parse(cluster.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := ns.Mirror(apiURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	writeKubeconfig(t, cluster.Config.CAData, cluster.Config.CertData, cluster.Config.KeyData, cluster.Config.Host, filepath.Join(rootfs, "kubeconfig"))

	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "a"}}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.ServiceSpec{ClusterIP: "10.0.7.7", Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if err := cluster.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}

	agentArgs := []string{rootfs, "/agent", "--kubeconfig=/kubeconfig", "--node-name=node-a", "--ip-families=IPv4",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--min-sync-interval=100ms"}
	var agent *exec.Cmd
	var logs strings.Builder
	ns.Do(func() {
		agent = exec.Command("chroot", agentArgs...)
		// Only what the image sets: a runtime passes nothing of the host's environment.
		agent.Env = append([]string{}, env...)
		agent.Stdout, agent.Stderr = &logs, &logs
		err = agent.Start()
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = agent.Process.Kill()
			_ = agent.Wait()
		}
	}
	defer stop()

	deadline := time.Now().Add(60 * time.Second)
	for {
		table, err := ns.Command("", "nft", "list", "table", "ip", "fleetslice")
		if err == nil && strings.Contains(table, "10.0.7.7") && strings.Contains(table, "10.244.0.9") {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the agent from the image did not program 10.0.7.7 -> 10.244.0.9 in 60s; table: %v %s\nagent log:\n%s", err, table, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()

	out, err := ns.Command("", "chroot", rootfs, "/agent", "--cleanup", "--ip-families=IPv4")
	if err != nil {
		t.Fatalf("/agent --cleanup: %v: %s", err, out)
	}
	tables, err := ns.Command("", "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tables, "fleetslice") {
		t.Errorf("--cleanup left the table: %s", tables)
	}
}

func writeKubeconfig(t *testing.T, ca, cert, key []byte, server, path string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}
