package installer

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
)

// helmTemplate renders dist/chart with helm template and extra arguments, by kind/namespace/name.
func helmTemplate(t *testing.T, args ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	helm, err := k8sbin.Path(k8sbin.Helm)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"template", "fleetslice", filepath.Join(repoRoot(t), "dist/chart"), "--namespace", Namespace}
	cmd := exec.Command(helm, append(base, args...)...)
	cmd.Env = append(os.Environ(), helmHome(t)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("helm template %v: %v: %s", args, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	objs, err := Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return m
}

// helmHome keeps helm's cache, configuration and data in the test's directory.
func helmHome(t *testing.T) []string {
	dir := t.TempDir()
	return []string{"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data")}
}

const nonDefaultValues = `
imagePullSecrets:
- name: regcred
manager:
  replicas: 3
  image:
    repository: registry.example/fs/manager
    tag: v9.9.9
    digest: sha256:1111111111111111111111111111111111111111111111111111111111111111
    pullPolicy: Always
  priorityClassName: fleetslice-high
  podAnnotations:
    example.com/team: net
dns:
  replicas: 5
  image:
    tag: ""
    digest: sha256:2222222222222222222222222222222222222222222222222222222222222222
  podAnnotations:
    prometheus.io/scrape: "true"
    prometheus.io/port: "9153"
agent:
  image:
    pullPolicy: Never
  priorityClassName: ""
`

// TestChartAtNonDefaultValues renders the chart with every value of the workloads' pods set away
// from its default and checks each lands where it should, and that nothing else changes.
func TestChartAtNonDefaultValues(t *testing.T) {
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(nonDefaultValues), 0o644); err != nil {
		t.Fatal(err)
	}
	defaults := helmTemplate(t)
	custom := helmTemplate(t, "--values", valuesFile)

	type want struct {
		replicas          any // nil: not a Deployment; numbers decode as float64
		image, pullPolicy string
		priorityClassName any // nil: absent
		annotations       map[string]any
	}
	wants := map[string]want{
		"Deployment/" + Namespace + "/fleetslice-controller-manager": {
			replicas: float64(3), pullPolicy: "Always", priorityClassName: "fleetslice-high",
			image:       "registry.example/fs/manager:v9.9.9@sha256:1111111111111111111111111111111111111111111111111111111111111111",
			annotations: map[string]any{"example.com/team": "net"},
		},
		"Deployment/" + Namespace + "/fleetslice-dns": {
			replicas: float64(5), pullPolicy: PullPolicy,
			image:       "ghcr.io/fleetslice/dns@sha256:2222222222222222222222222222222222222222222222222222222222222222",
			annotations: map[string]any{"prometheus.io/scrape": "true", "prometheus.io/port": "9153"},
		},
		"DaemonSet/" + Namespace + "/fleetslice-agent": {
			pullPolicy: "Never", image: defaultAgentImage,
		},
	}
	for key, w := range wants {
		obj := custom[key]
		if obj == nil {
			t.Fatalf("the chart does not render %s", key)
		}
		spec := obj.Object["spec"].(map[string]any)
		if spec["replicas"] != w.replicas {
			t.Errorf("%s: replicas %v (%T), want %v", key, spec["replicas"], spec["replicas"], w.replicas)
		}
		pod, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		if got := pod["imagePullSecrets"]; !reflect.DeepEqual(got, []any{map[string]any{"name": "regcred"}}) {
			t.Errorf("%s: imagePullSecrets %v", key, got)
		}
		if got := pod["priorityClassName"]; got != w.priorityClassName {
			t.Errorf("%s: priorityClassName %v, want %v", key, got, w.priorityClassName)
		}
		annotations, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "metadata", "annotations")
		if !reflect.DeepEqual(annotations, w.annotations) && (len(annotations) > 0 || len(w.annotations) > 0) {
			t.Errorf("%s: pod annotations %v, want %v", key, annotations, w.annotations)
		}
		c := pod["containers"].([]any)[0].(map[string]any)
		if c["image"] != w.image || c["imagePullPolicy"] != w.pullPolicy {
			t.Errorf("%s: image %v pulled %v, want %s pulled %s", key, c["image"], c["imagePullPolicy"], w.image, w.pullPolicy)
		}

		// With the fields the values set put back to the default render's, the object is the default.
		def := defaults[key].DeepCopy()
		obj = obj.DeepCopy()
		for _, o := range []*unstructured.Unstructured{def, obj} {
			unstructured.RemoveNestedField(o.Object, "spec", "replicas")
			unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations")
			for _, f := range []string{"imagePullSecrets", "priorityClassName"} {
				unstructured.RemoveNestedField(o.Object, "spec", "template", "spec", f)
			}
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			delete(containers[0].(map[string]any), "image")
			delete(containers[0].(map[string]any), "imagePullPolicy")
			_ = unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers")
		}
		if !equality.Semantic.DeepEqual(def.Object, obj.Object) {
			t.Errorf("%s: the values changed more than the fields they set", key)
		}
	}
	for key, obj := range defaults {
		if _, workload := wants[key]; workload {
			continue
		}
		if custom[key] == nil || !equality.Semantic.DeepEqual(obj.Object, custom[key].Object) {
			t.Errorf("%s changed with values that are not its own", key)
		}
	}
	if len(custom) != len(defaults) {
		t.Errorf("the chart renders %d objects with the values, %d without", len(custom), len(defaults))
	}
}

func TestSplitImage(t *testing.T) {
	const d = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
	for _, tc := range []struct{ in, repo, tag, digest string }{
		{"ghcr.io/fleetslice/manager:v0.1.0", "ghcr.io/fleetslice/manager", "v0.1.0", ""},
		{"127.0.0.1:5000/fleetslice/agent:v1@" + d, "127.0.0.1:5000/fleetslice/agent", "v1", d},
		{"127.0.0.1:5000/fleetslice/agent@" + d, "127.0.0.1:5000/fleetslice/agent", "", d},
		{"127.0.0.1:5000/fleetslice/agent", "127.0.0.1:5000/fleetslice/agent", "", ""},
		{"dns", "dns", "", ""},
	} {
		repo, tag, digest := splitImage(tc.in)
		if repo != tc.repo || tag != tc.tag || digest != tc.digest {
			t.Errorf("splitImage(%q) = %q, %q, %q; want %q, %q, %q", tc.in, repo, tag, digest, tc.repo, tc.tag, tc.digest)
		}
	}
}
