package installer

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/release/image"
	"github.com/fleetslice/fleetslice/pkg/version"
)

// docRegistry is the registry docs/install.md's commands name; the test serves its own instead.
const docRegistry = "registry.example/fleetslice"

// TestDocumentedImageCommands runs docs/install.md's first commands as written (the registry
// replaced by one served on loopback, dist/ by the test's directory), with only make, bash, go
// and git on PATH: no package manager, no container engine. Then it checks what they made: every
// image index in the registry holds a static binary for amd64 and one for arm64, and
// install.yaml and the chart's documented install name exactly the pushed digests.
func TestDocumentedImageCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles every image")
	}
	root := repoRoot(t)
	blocks := shellCommands(docSection(t, root, "On an existing cluster"))
	if len(blocks) < 2 {
		t.Fatalf("docs/install.md: want the install commands and the helm install, have %q", blocks)
	}
	makes, applies, helmInstalls := withPrefix(blocks[0], "make "), withPrefix(blocks[0], "kubectl "), withPrefix(blocks[1], "helm install ")
	if len(makes)+len(applies) != len(blocks[0]) || len(applies) != 1 || len(helmInstalls) != 1 {
		t.Fatalf("docs/install.md: want make commands and one kubectl apply, then one helm install; have %q", blocks)
	}
	targets := map[string]bool{}
	for _, c := range makes {
		if !strings.Contains(c, "REGISTRY="+docRegistry) {
			t.Fatalf("%q does not set REGISTRY=%s, so the test cannot point it at its own registry", c, docRegistry)
		}
		for _, word := range strings.Fields(c)[1:] {
			targets[word] = !strings.Contains(word, "=")
		}
	}
	for _, target := range []string{"docker-build", "docker-push", "build-installer"} {
		if !targets[target] {
			t.Errorf("docs/install.md's commands do not run make %s", target)
		}
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	dist := filepath.Join(work, "dist")
	ours := u.Host + "/fleetslice"
	local := func(command string) string {
		command = strings.ReplaceAll(command, docRegistry, ours)
		return strings.ReplaceAll(command, "dist/", dist+"/")
	}
	env := restrictedEnv(t, root, work, dist)
	for _, c := range makes {
		started := time.Now()
		cmd := exec.Command("bash", "-c", local(c))
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", local(c), err, out)
		}
		t.Logf("%s: %s", c, time.Since(started).Round(time.Second))
	}

	pushed, err := image.ReadPushed(filepath.Join(dist, image.DigestsFile))
	if err != nil {
		t.Fatal(err)
	}
	// What the documented kubectl apply would apply.
	apply := strings.Fields(local(applies[0]))
	if !strings.HasPrefix(applies[0], "kubectl apply --server-side -f ") || !strings.HasPrefix(apply[len(apply)-1], dist+"/") {
		t.Fatalf("docs/install.md applies %q, want kubectl apply --server-side -f of a file make build-installer writes", applies[0])
	}
	installed := decodeFileT(t, apply[len(apply)-1])
	images := map[string]string{
		ManagerContainer: workloadImage(t, installed, "Deployment", ManagerContainer),
		AgentContainer:   workloadImage(t, installed, "DaemonSet", AgentContainer),
		DNSContainer:     workloadImage(t, installed, "Deployment", DNSContainer),
	}
	for container, repo := range map[string]string{ManagerContainer: "manager", AgentContainer: "agent", DNSContainer: "dns"} {
		ref := ours + "/" + repo + ":" + version.Release
		digest := pushed[ref]
		if digest == "" {
			t.Errorf("%s was not pushed (pushed: %v)", ref, pushed)
			continue
		}
		if want := ref + "@" + digest; images[container] != want {
			t.Errorf("install.yaml runs %s as %s, want the pushed %s", container, images[container], want)
		}
		checkIndex(t, ref+"@"+digest, "/"+map[string]string{"manager": "manager", "agent": "agent", "dns": "fleetslice-dns"}[repo])
	}

	// The documented helm install, rendered: the chart's defaults name the same pinned images.
	helmArgs := strings.Fields(local(helmInstalls[0]))[2:]
	helm, err := k8sbin.Path(k8sbin.Helm)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helm, append([]string{"template"}, helmArgs...)...)
	cmd.Env = append(os.Environ(), helmHome(t)...)
	rendered, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %v: %v", helmArgs, err)
	}
	chartObjs, err := Decode(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for container, want := range images {
		kind := "Deployment"
		if container == AgentContainer {
			kind = "DaemonSet"
		}
		if got := workloadImage(t, chartObjs, kind, container); got != want {
			t.Errorf("the chart runs %s as %s, install.yaml as %s", container, got, want)
		}
	}
	for _, f := range []string{"install.yaml", "crds.yaml", "chart/values.yaml"} {
		data, err := os.ReadFile(filepath.Join(dist, f))
		if err != nil || bytes.Contains(data, []byte(":latest")) {
			t.Errorf("%s names a :latest image or is missing (%v)", f, err)
		}
	}
}

// restrictedEnv is the environment the documented commands run in: PATH holds make, bash, go and
// git alone, so a build step that reached for apt-get, dpkg, curl or a container engine would
// fail. DIST moves the output into the test's directory. CONTROLLER_GEN is a no-op so the test
// does not rewrite config/ in the checkout (the generated config/ is what dist/'s own check uses).
func restrictedEnv(t *testing.T, root, work, dist string) []string {
	t.Helper()
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"make", "bash", "go", "git"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("the documented commands need %s: %v", tool, err)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	noop, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "DIST", "CONTROLLER_GEN", "KUSTOMIZE", "IMG", "AGENT_IMG", "DNS_IMG", "VERSION", "PLATFORMS", "REGISTRY", "MAKEFLAGS":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+bin, "DIST="+dist, "CONTROLLER_GEN="+noop, "KUSTOMIZE="+kustomizeBinary(t, root))
}

func decodeFileT(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// workloadImage is the image of the container named container in the one object of kind holding it.
func workloadImage(t *testing.T, objs []*unstructured.Unstructured, kind, container string) string {
	t.Helper()
	var found []string
	for _, obj := range objs {
		if obj.GetKind() != kind {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if cm := c.(map[string]any); cm["name"] == container {
				found = append(found, cm["image"].(string))
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s containers named %s", len(found), kind, container)
	}
	return found[0]
}

// checkIndex pulls the index at pinned and checks it holds linux/amd64 and linux/arm64 images,
// each holding only entrypoint, a static ELF binary for its own architecture.
func checkIndex(t *testing.T, pinned, entrypoint string) {
	t.Helper()
	ref, err := name.NewDigest(pinned)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pulling %s: %v", pinned, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, desc := range im.Manifests {
		platforms = append(platforms, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatalf("%s %s: %v", pinned, desc.Platform, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != desc.Platform.OS || cf.Architecture != desc.Platform.Architecture {
			t.Errorf("%s: the %s entry's config says %s/%s", pinned, desc.Platform, cf.OS, cf.Architecture)
		}
		bin := onlyFile(t, img, entrypoint)
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s %s: %s is not an ELF binary: %v", pinned, desc.Platform, entrypoint, err)
		}
		if f.Machine != machines[desc.Platform.Architecture] {
			t.Errorf("%s %s: %s is built for %s", pinned, desc.Platform, entrypoint, f.Machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s %s: %s is dynamically linked; the empty base has no loader", pinned, desc.Platform, entrypoint)
			}
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("%s holds %v, want linux/amd64 and linux/arm64", pinned, platforms)
	}
}

// onlyFile returns the content of path, which must be the image's one file.
func onlyFile(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want one layer, have %d (%v)", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var content []byte
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, "/"+hdr.Name)
		if "/"+hdr.Name == path {
			if content, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(names) != 1 || content == nil {
		t.Fatalf("the image holds %v, want only %s", names, path)
	}
	return content
}
