package installer

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/fleetslice/fleetslice/pkg/version"
)

// The chart is generated from the same objects as dist/install.yaml, so the two cannot drift: each
// object becomes a template in which the namespace and the settings below come from values, and
// values.yaml holds what install.yaml has. Rendered with default values it gives install.yaml's
// objects (a test checks it object by object).

// workload is a Deployment or DaemonSet, told apart by its container, whose settings the chart
// exposes under a values key.
type workload struct {
	kind, container, key string
}

var workloads = []workload{
	{"Deployment", ManagerContainer, "manager"},
	{"DaemonSet", AgentContainer, "agent"},
	{"Deployment", DNSContainer, "dns"},
}

// podSettings are pod spec fields users set per workload; containerSettings are the container's.
var (
	podSettings       = []string{"nodeSelector", "tolerations", "affinity"}
	containerSettings = []string{"args", "resources"}
)

const nsSentinel = "__RELEASE_NAMESPACE__"

const valuesHeader = `# Defaults render exactly dist/install.yaml's objects. Per workload (manager, agent, dns):
# image (repository, tag, digest: pinned when make build-installer ran after make docker-push,
# pullPolicy), replicas (manager and dns), podAnnotations, priorityClassName, nodeSelector,
# tolerations, affinity, args and resources. imagePullSecrets (a list of {name: ...}) are given to
# every workload. The CRDs are in crds/, which Helm installs but never upgrades: apply
# dist/crds.yaml before helm upgrade (docs/install.md).
`

// Chart returns the files of dist/chart, by path: Chart.yaml, values.yaml, the CRDs under crds/
// and one template per other object. The chart's version is the release (pkg/version); appVersion
// is the images' tag.
func Chart(objs []*unstructured.Unstructured, appVersion string) (map[string][]byte, error) {
	files := map[string][]byte{
		"Chart.yaml": []byte(fmt.Sprintf(`apiVersion: v2
name: fleetslice
description: fleetslice's EndpointSlice, topology and multi-cluster services controllers and its node agent, for one member cluster.
type: application
version: %s
appVersion: %q
`, strings.TrimPrefix(version.Release, "v"), appVersion)),
	}
	// Pull secrets are the registry's, shared by the three images.
	values := map[string]any{"createNamespace": true, "imagePullSecrets": []any{}}
	for _, obj := range objs {
		obj = obj.DeepCopy()
		kind := obj.GetKind()
		file := strings.ToLower(kind) + "-" + obj.GetName() + ".yaml"
		if kind == "CustomResourceDefinition" {
			out, err := sigyaml.Marshal(obj.Object)
			if err != nil {
				return nil, err
			}
			files["crds/"+obj.GetName()+".yaml"] = out
			continue
		}
		holes := map[string]string{}
		if err := templatize(obj, values, holes); err != nil {
			return nil, err
		}
		out, err := sigyaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		text := fillAPIServer(fillHoles(string(out), holes))
		if kind == "Namespace" {
			text = "{{- if .Values.createNamespace }}\n" + text + "{{- end }}\n"
		}
		files["templates/"+file] = []byte(text)
	}
	valuesYAML, err := sigyaml.Marshal(values)
	if err != nil {
		return nil, err
	}
	files["values.yaml"] = append([]byte(valuesHeader), valuesYAML...)
	return files, nil
}

// templatize puts sentinels where values go, records what each sentinel becomes, and copies the
// object's own settings into values.
func templatize(obj *unstructured.Unstructured, values map[string]any, holes map[string]string) error {
	if obj.GetNamespace() != "" {
		obj.SetNamespace(nsSentinel)
	}
	if obj.GetKind() == "Namespace" {
		obj.SetName(nsSentinel)
	}
	if subjects, ok, _ := unstructured.NestedSlice(obj.Object, "subjects"); ok {
		for _, s := range subjects {
			if sm, ok := s.(map[string]any); ok && sm["namespace"] != nil {
				sm["namespace"] = nsSentinel
			}
		}
		_ = unstructured.SetNestedSlice(obj.Object, subjects, "subjects")
	}
	for _, w := range workloads {
		if obj.GetKind() != w.kind || !hasContainer(obj, w.container) {
			continue
		}
		v := map[string]any{}
		values[w.key] = v
		if w.kind == "Deployment" {
			replicas, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "replicas")
			if !found {
				replicas = int64(1) // the API server's default
			}
			v["replicas"] = replicas
			_ = unstructured.SetNestedField(obj.Object, hole(holes, w.key, "replicas", holeInt, ".Values."+w.key+".replicas"), "spec", "replicas")
		}
		annotations, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "metadata", "annotations")
		v["podAnnotations"] = map[string]any{}
		if annotations != nil {
			v["podAnnotations"] = annotations
		}
		_ = unstructured.SetNestedField(obj.Object, hole(holes, w.key, "annotations", holeBlock, ".Values."+w.key+".podAnnotations"), "spec", "template", "metadata", "annotations")
		podSpec, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		for _, field := range podSettings {
			v[field] = emptyLike(field)
			if cur, ok := podSpec[field]; ok {
				v[field] = cur
			}
			podSpec[field] = hole(holes, w.key, field, holeBlock, ".Values."+w.key+"."+field)
		}
		v["priorityClassName"], _ = podSpec["priorityClassName"].(string)
		podSpec["priorityClassName"] = hole(holes, w.key, "priorityClassName", holeString, ".Values."+w.key+".priorityClassName")
		if secrets, ok := podSpec["imagePullSecrets"]; ok {
			values["imagePullSecrets"] = secrets
		}
		podSpec["imagePullSecrets"] = hole(holes, w.key, "imagePullSecrets", holeBlock, ".Values.imagePullSecrets")
		containers, _ := podSpec["containers"].([]any)
		for _, c := range containers {
			cm := c.(map[string]any)
			if cm["name"] != w.container {
				continue
			}
			repo, tag, digest := splitImage(cm["image"].(string))
			policy, _ := cm["imagePullPolicy"].(string)
			v["image"] = map[string]any{"repository": repo, "tag": tag, "digest": digest, "pullPolicy": policy}
			cm["image"] = hole(holes, w.key, "image", holeImage, ".Values."+w.key+".image")
			cm["imagePullPolicy"] = hole(holes, w.key, "imagePullPolicy", holeString, ".Values."+w.key+".image.pullPolicy")
			if w.container == AgentContainer {
				chartAPIServer(cm, v)
			}
			for _, field := range containerSettings {
				v[field] = emptyLike(field)
				if cur, ok := cm[field]; ok {
					v[field] = cur
				}
				cm[field] = hole(holes, w.key, field, holeBlock, ".Values."+w.key+"."+field)
			}
		}
		if err := unstructured.SetNestedMap(obj.Object, podSpec, "spec", "template", "spec"); err != nil {
			return err
		}
	}
	return nil
}

func emptyLike(field string) any {
	if field == "args" || field == "tolerations" {
		return []any{}
	}
	return map[string]any{}
}

// How a value fills its hole in a template.
const (
	// holeBlock is a list or map, omitted when empty, as kustomize's output omits it.
	holeBlock = iota
	// holeString is a string, omitted when empty.
	holeString
	// holeInt is a number, always present.
	holeInt
	// holeImage is an image values map: repository, then :tag and @digest when set.
	holeImage
)

// hole returns the sentinel for one field and records how its value fills it: kind, and expr,
// the value's path in .Values.
func hole(holes map[string]string, key, field string, kind int, expr string) string {
	sentinel := fmt.Sprintf("__HOLE_%s_%s__", key, field)
	switch kind {
	case holeInt:
		holes[sentinel] = "={{ " + expr + " | int }}"
	case holeImage:
		holes[sentinel] = fmt.Sprintf(`="{{ %[1]s.repository }}{{ with %[1]s.tag }}:{{ . }}{{ end }}{{ with %[1]s.digest }}@{{ . }}{{ end }}"`, expr)
	case holeString:
		holes[sentinel] = "?" + expr
	default:
		holes[sentinel] = expr
	}
	return sentinel
}

var holeLine = regexp.MustCompile(`(?m)^( *)(- )?([A-Za-z]+): (__HOLE_[A-Za-z]+_[A-Za-z]+__)$`)

// fillHoles replaces each sentinel line with its template: inline ("=" holes), or wrapped in a
// `with` that drops the field when the value is empty.
func fillHoles(text string, holes map[string]string) string {
	text = strings.ReplaceAll(text, nsSentinel, "{{ .Release.Namespace }}")
	return holeLine.ReplaceAllStringFunc(text, func(line string) string {
		m := holeLine.FindStringSubmatch(line)
		indent, dash, field, sentinel := m[1], m[2], m[3], m[4]
		tmpl := holes[sentinel]
		if inline, ok := strings.CutPrefix(tmpl, "="); ok {
			return indent + dash + field + ": " + inline
		}
		// A field under a list item's first key keeps the item's dash on a line of its own.
		inner := indent + strings.Repeat(" ", len(dash))
		prefix := ""
		if dash != "" {
			prefix = indent + "-\n"
		}
		if expr, ok := strings.CutPrefix(tmpl, "?"); ok {
			return fmt.Sprintf("%s%s{{- with %s }}\n%s%s: {{ . | quote }}\n%s{{- end }}", prefix, inner, expr, inner, field, inner)
		}
		return fmt.Sprintf("%s%s{{- with %s }}\n%s%s:\n%s  {{- toYaml . | nindent %d }}\n%s{{- end }}",
			prefix, inner, tmpl, inner, field, inner, len(inner)+2, inner)
	})
}

// splitImage splits repository[:tag][@digest]; a colon before the last slash is a registry's port.
func splitImage(image string) (repo, tag, digest string) {
	if at := strings.Index(image, "@"); at >= 0 {
		image, digest = image[:at], image[at+1:]
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:], digest
	}
	return image, "", digest
}

// hasContainer reports whether a workload's pod template has a container named name.
func hasContainer(obj *unstructured.Unstructured, name string) bool {
	containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if cm, ok := c.(map[string]any); ok && cm["name"] == name {
			return true
		}
	}
	return false
}
