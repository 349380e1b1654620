package installer

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/release/image"
	"github.com/fleetslice/fleetslice/pkg/version"
)

// The images dist/ names: make build-installer's defaults, the release's tags, unpinned (no push
// is recorded in a checkout).
const (
	defaultManagerImage = "ghcr.io/fleetslice/manager:" + version.Release
	defaultAgentImage   = "ghcr.io/fleetslice/agent:" + version.Release
	defaultDNSImage     = "ghcr.io/fleetslice/dns:" + version.Release
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// kustomizeBinary is $KUSTOMIZE (make test sets it) or bin/kustomize (make kustomize builds it).
func kustomizeBinary(t *testing.T, root string) string {
	t.Helper()
	if k := os.Getenv("KUSTOMIZE"); k != "" {
		return k
	}
	k := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(k); err != nil {
		t.Fatalf("no kustomize: run `make kustomize` or set KUSTOMIZE (make test does both)")
	}
	return k
}

func defaultOptions(t *testing.T) Options {
	root := repoRoot(t)
	refs, err := image.ResolveRefs("", "", image.Refs{})
	if err != nil {
		t.Fatal(err)
	}
	if (refs != image.Refs{Manager: defaultManagerImage, Agent: defaultAgentImage, DNS: defaultDNSImage}) {
		t.Fatalf("make build-installer names %+v by default, not the images this test checks", refs)
	}
	return Options{Root: root, Kustomize: kustomizeBinary(t, root), ManagerImage: defaultManagerImage, AgentImage: defaultAgentImage, DNSImage: defaultDNSImage}
}

// TestDistIsUpToDate fails when config/ changed and dist/ was not rebuilt: what a user downloads
// must be what the tests below check.
func TestDistIsUpToDate(t *testing.T) {
	o := defaultOptions(t)
	files, err := Files(o, version.Release)
	if err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(o.Root, "dist")
	for path, want := range files {
		have, err := os.ReadFile(filepath.Join(dist, path))
		if err != nil || !bytes.Equal(have, want) {
			t.Errorf("dist/%s is stale or missing (%v): run make build-installer", path, err)
		}
	}
	err = filepath.WalkDir(filepath.Join(dist, "chart"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dist, path)
		if _, ok := files[rel]; !ok {
			t.Errorf("dist/%s is not generated any more: run make build-installer", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInstallerHoldsEverything checks what install.yaml must carry for a member to work.
func TestInstallerHoldsEverything(t *testing.T) {
	objs, err := Member(defaultOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		have[obj.GetKind()+"/"+obj.GetName()] = obj
	}
	for _, want := range []string{
		"CustomResourceDefinition/serviceexports.multicluster.x-k8s.io",
		"CustomResourceDefinition/serviceimports.multicluster.x-k8s.io",
		"CustomResourceDefinition/clusterproperties.about.k8s.io",
		"CustomResourceDefinition/serviceexportrecords.fleetslice.io",
		"Namespace/" + Namespace,
		"ClusterRole/fleetslice-manager-role", "ClusterRole/fleetslice-agent-role",
		"Deployment/fleetslice-controller-manager", "DaemonSet/fleetslice-agent",
		"Service/fleetslice-controller-manager-metrics",
		"Deployment/fleetslice-dns", "Service/fleetslice-dns", "ConfigMap/fleetslice-dns",
		"ServiceAccount/fleetslice-dns", "ClusterRole/fleetslice-dns", "ClusterRoleBinding/fleetslice-dns",
	} {
		if have[want] == nil {
			t.Errorf("install.yaml lacks %s", want)
		}
	}
	if d := have["Deployment/fleetslice-controller-manager"]; d != nil {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if img := containers[0].(map[string]any)["image"]; img != defaultManagerImage {
			t.Errorf("manager image %v, want %s", img, defaultManagerImage)
		}
	}
	if d := have["Deployment/fleetslice-dns"]; d != nil {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if img := containers[0].(map[string]any)["image"]; img != defaultDNSImage {
			t.Errorf("fleetslice-dns image %v, want %s", img, defaultDNSImage)
		}
		if d.GetNamespace() != Namespace {
			t.Errorf("fleetslice-dns in namespace %q, want %s", d.GetNamespace(), Namespace)
		}
	}
	if role := have["ClusterRole/fleetslice-manager-role"]; role != nil {
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		found := false
		for _, r := range rules {
			rm := r.(map[string]any)
			for _, res := range rm["resources"].([]any) {
				if res == "services/finalizers" {
					found = true
				}
			}
		}
		if !found {
			t.Error("the manager's ClusterRole lacks update on services/finalizers, which blockOwnerDeletion needs")
		}
	}
}

// TestChartRendersTheInstaller renders dist/chart with default values and compares it with
// dist/install.yaml object by object.
func TestChartRendersTheInstaller(t *testing.T) {
	root := repoRoot(t)
	helm, err := k8sbin.Path(k8sbin.Helm)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := exec.Command(helm, "template", "fleetslice", filepath.Join(root, "dist/chart"),
		"--namespace", Namespace, "--include-crds").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	chartObjs, err := Decode(rendered)
	if err != nil {
		t.Fatal(err)
	}
	installed, err := os.ReadFile(filepath.Join(root, "dist/install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	installObjs, err := Decode(installed)
	if err != nil {
		t.Fatal(err)
	}
	byKey := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			m[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
		}
		return m
	}
	want, got := byKey(installObjs), byKey(chartObjs)
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] == nil {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if !equality.Semantic.DeepEqual(want[k].Object, got[k].Object) {
			t.Errorf("the chart renders %s differently from install.yaml", k)
		}
	}
	for k := range got {
		if want[k] == nil {
			t.Errorf("the chart renders %s, which install.yaml lacks", k)
		}
	}
	if len(want) < 10 {
		t.Fatalf("install.yaml holds only %d objects", len(want))
	}
}
