package localset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply server-side applies objs, as ReadManifests returns them (Namespaces first).
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if err := c.Patch(ctx, obj.DeepCopy(), client.Apply, client.FieldOwner("fleetslice-cli"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// ReadManifests decodes every YAML document of the manifests in dir (files ending in .yaml,
// except kustomize's kustomization.yaml), Namespaces first so the rest can land in them. A dir
// with no objects is an error: a relative path read from the wrong directory must not pass for
// an empty workload.
func ReadManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := decoder.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			objs = append(objs, obj)
		}
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no manifests (*.yaml with objects) in %s", dir)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		return strings.EqualFold(objs[i].GetKind(), "Namespace") && !strings.EqualFold(objs[j].GetKind(), "Namespace")
	})
	return objs, nil
}
