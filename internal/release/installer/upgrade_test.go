package installer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

const oldDescription = "fleetslice upgrade test: the schema of the release before this one"

// TestHelmUpgradeAppliesCRDsAsDocumented installs an older chart (its CRDs' schemas differ) with
// the documented helm install, then runs docs/install.md's Helm upgrade commands against an API
// server: helm upgrade alone leaves the old CRDs (Helm never upgrades crds/), and the documented
// pair (dist/crds.yaml applied first) leaves exactly dist/crds.yaml's.
func TestHelmUpgradeAppliesCRDsAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	root := repoRoot(t)
	install := withPrefix(shellCommands(docSection(t, root, "On an existing cluster"))[1], "helm install ")
	var upgrade []string
	for _, block := range shellCommands(docSection(t, root, "Upgrading")) {
		if len(withPrefix(block, "helm upgrade ")) > 0 {
			upgrade = block
		}
	}
	if len(install) != 1 || len(upgrade) != 2 || !strings.Contains(upgrade[0], "dist/crds.yaml") {
		t.Fatalf("docs/install.md: want one helm install command and an upgrade block of the CRDs' apply and helm upgrade; have %q and %q", install, upgrade)
	}

	cluster, err := testenv.Start("upgrade")
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newCRDs := readCRDs(t, filepath.Join(root, "dist", "crds.yaml"))
	// envtest serves some of these CRDs already; a fresh cluster has none.
	for _, crd := range newCRDs {
		removeCRD(ctx, t, cluster.Client, crd.Name)
	}

	// The older release: dist/chart with each CRD's schema described differently.
	work := t.TempDir()
	old := filepath.Join(work, "old")
	if out, err := exec.Command("cp", "-a", filepath.Join(root, "dist", "chart"), old).CombinedOutput(); err != nil {
		t.Fatalf("copying the chart: %v: %s", err, out)
	}
	for _, crd := range newCRDs {
		path := filepath.Join(old, "crds", crd.Name+".yaml")
		prev := crd.DeepCopy()
		for i := range prev.Spec.Versions {
			prev.Spec.Versions[i].Schema.OpenAPIV3Schema.Description = oldDescription
		}
		writeObject(t, path, prev)
	}

	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := testenv.WriteKubeconfig(cluster.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(command string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", "-c", command)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+work, "PATH="+toolPath(t)+":"+os.Getenv("PATH"))
		cmd.Env = append(cmd.Env, helmHome(t)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", command, err, out)
		}
	}
	run(strings.Replace(install[0], "dist/chart", old, 1))
	checkCRDs(ctx, t, cluster.Client, newCRDs, true)

	run(upgrade[1])
	checkCRDs(ctx, t, cluster.Client, newCRDs, true) // helm upgrade alone: still the old schemas

	for _, command := range upgrade {
		run(command)
	}
	checkCRDs(ctx, t, cluster.Client, newCRDs, false)
}

// toolPath is a directory list holding helm and kubectl as the Makefile builds them.
func toolPath(t *testing.T) string {
	var dirs []string
	for _, tool := range []string{k8sbin.Helm, k8sbin.Kubectl} {
		path, err := k8sbin.Path(tool)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.Dir(path))
	}
	return strings.Join(dirs, ":")
}

func readCRDs(t *testing.T, path string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		crds = append(crds, crd)
	}
	if len(crds) < 4 {
		t.Fatalf("%s holds %d CRDs", path, len(crds))
	}
	return crds
}

func writeObject(t *testing.T, path string, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	out, err := sigyaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func removeCRD(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = name
	if err := c.Delete(ctx, crd); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	for {
		err := c.Get(ctx, client.ObjectKey{Name: name}, crd)
		if apierrors.IsNotFound(err) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("CRD %s is not gone: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkCRDs compares every served CRD's versions with want's: all with the old description when
// old, else equal to want's.
func checkCRDs(ctx context.Context, t *testing.T, c client.Client, want []*apiextensionsv1.CustomResourceDefinition, old bool) {
	t.Helper()
	for _, w := range want {
		have := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: w.Name}, have); err != nil {
			t.Fatalf("CRD %s: %v", w.Name, err)
		}
		for i, v := range have.Spec.Versions {
			if desc := v.Schema.OpenAPIV3Schema.Description; (desc == oldDescription) != old {
				t.Errorf("CRD %s %s: schema description %q, want the old one: %v", w.Name, v.Name, desc, old)
			}
			if !old && !equality.Semantic.DeepEqual(v.Schema, w.Spec.Versions[i].Schema) {
				t.Errorf("CRD %s %s: the served schema is not dist/crds.yaml's", w.Name, v.Name)
			}
		}
	}
}

// TestCRDsFileHoldsTheInstalledCRDs checks dist/crds.yaml, which Helm users apply before an
// upgrade, holds exactly the CRDs of dist/install.yaml and of the chart's crds/.
func TestCRDsFileHoldsTheInstalledCRDs(t *testing.T) {
	root := repoRoot(t)
	byName := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				m[o.GetName()] = o.Object
			}
		}
		return m
	}
	crds := byName(decodeFileT(t, filepath.Join(root, "dist", "crds.yaml")))
	installed := byName(decodeFileT(t, filepath.Join(root, "dist", "install.yaml")))
	entries, err := os.ReadDir(filepath.Join(root, "dist", "chart", "crds"))
	if err != nil {
		t.Fatal(err)
	}
	var chartObjs []*unstructured.Unstructured
	for _, e := range entries {
		chartObjs = append(chartObjs, decodeFileT(t, filepath.Join(root, "dist", "chart", "crds", e.Name()))...)
	}
	chart := byName(chartObjs)
	if len(crds) < 4 || !equality.Semantic.DeepEqual(crds, installed) || !equality.Semantic.DeepEqual(crds, chart) {
		t.Errorf("dist/crds.yaml holds %d CRDs, install.yaml %d, the chart %d, or they differ", len(crds), len(installed), len(chart))
	}
}
