package installer

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigyaml "sigs.k8s.io/yaml"
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

// Chart returns the files of dist/chart, by path: Chart.yaml, values.yaml, the CRDs under crds/
// and one template per other object.
func Chart(objs []*unstructured.Unstructured, version string) (map[string][]byte, error) {
	files := map[string][]byte{
		"Chart.yaml": []byte(fmt.Sprintf(`apiVersion: v2
name: fleetslice
description: fleetslice's EndpointSlice, topology and multi-cluster services controllers and its node agent, for one member cluster.
type: application
version: 0.1.0
appVersion: %q
`, version)),
	}
	values := map[string]any{"createNamespace": true}
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
	files["values.yaml"] = append([]byte("# Defaults render exactly dist/install.yaml's objects.\n"), valuesYAML...)
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
		podSpec, _, _ := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		for _, field := range podSettings {
			v[field] = emptyLike(field)
			if cur, ok := podSpec[field]; ok {
				v[field] = cur
			}
			podSpec[field] = hole(holes, w.key, field, true)
		}
		containers, _ := podSpec["containers"].([]any)
		for _, c := range containers {
			cm := c.(map[string]any)
			if cm["name"] != w.container {
				continue
			}
			repo, tag := splitImage(cm["image"].(string))
			v["image"] = map[string]any{"repository": repo, "tag": tag}
			cm["image"] = hole(holes, w.key, "image", false)
			if w.container == AgentContainer {
				chartAPIServer(cm, v)
			}
			for _, field := range containerSettings {
				v[field] = emptyLike(field)
				if cur, ok := cm[field]; ok {
					v[field] = cur
				}
				cm[field] = hole(holes, w.key, field, true)
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

// hole returns the sentinel for one value and records its template: an image is a quoted
// scalar; a block (list or map) is omitted when empty, as kustomize's output omits it.
func hole(holes map[string]string, key, field string, block bool) string {
	sentinel := fmt.Sprintf("__HOLE_%s_%s__", key, field)
	if block {
		holes[sentinel] = fmt.Sprintf(".Values.%s.%s", key, field)
	} else {
		holes[sentinel] = fmt.Sprintf(`"{{ .Values.%[1]s.image.repository }}:{{ .Values.%[1]s.image.tag }}"`, key)
	}
	return sentinel
}

var holeLine = regexp.MustCompile(`(?m)^( *)(- )?([A-Za-z]+): (__HOLE_[A-Za-z]+_[A-Za-z]+__)$`)

func fillHoles(text string, holes map[string]string) string {
	text = strings.ReplaceAll(text, nsSentinel, "{{ .Release.Namespace }}")
	return holeLine.ReplaceAllStringFunc(text, func(line string) string {
		m := holeLine.FindStringSubmatch(line)
		indent, dash, field, sentinel := m[1], m[2], m[3], m[4]
		tmpl := holes[sentinel]
		if strings.HasPrefix(tmpl, `"`) {
			return indent + dash + field + ": " + tmpl
		}
		// A block under a list item's first key keeps the item's dash on a line of its own.
		inner := indent + strings.Repeat(" ", len(dash))
		prefix := ""
		if dash != "" {
			prefix = indent + "-\n"
		}
		return fmt.Sprintf("%s%s{{- with %s }}\n%s%s:\n%s  {{- toYaml . | nindent %d }}\n%s{{- end }}",
			prefix, inner, tmpl, inner, field, inner, len(inner)+2, inner)
	})
}

func splitImage(image string) (repo, tag string) {
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, "latest"
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
