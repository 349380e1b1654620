// Package clusterid finds a member cluster's ClusterSet id: the value of the ClusterProperty
// cluster.clusterset.k8s.io (KEP-2149, group about.k8s.io) when that exists, else a configured
// fallback. The upstream about-api module is not on the Go module proxy, so the property is
// read as unstructured data and fleetslice ships the CRD itself (config/crd/about).
package clusterid

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// PropertyName is the ClusterProperty that holds the cluster id.
	PropertyName = "cluster.clusterset.k8s.io"
	// MaxLength bounds an id: it is a label value in the broker and part of a ServiceAccount name.
	MaxLength = validation.LabelValueMaxLength - len("member-")
)

// GroupVersionKind of ClusterProperty.
var GroupVersionKind = schema.GroupVersionKind{Group: "about.k8s.io", Version: "v1alpha1", Kind: "ClusterProperty"}

// Validate says why id cannot be a cluster id, or returns nil. An id is a DNS-1123 label of at
// most MaxLength characters: it is used as a label value, in Lease and ServiceAccount names,
// and in the mcs-api ClusterStatus, which asks for an RFC-1123 label.
func Validate(id string) error {
	if id == "" {
		return errors.New("cluster id is empty")
	}
	if len(id) > MaxLength {
		return fmt.Errorf("cluster id %q is longer than %d characters", id, MaxLength)
	}
	if errs := validation.IsDNS1123Label(id); len(errs) > 0 {
		return fmt.Errorf("cluster id %q is not a DNS-1123 label: %s", id, strings.Join(errs, "; "))
	}
	return nil
}

// Resolve returns this cluster's id. The ClusterProperty wins when it exists; fallback is used
// when it does not (or its CRD is not installed). Both set and different is an error, since a
// member that disagrees with its own ClusterProperty would publish under the wrong name.
func Resolve(ctx context.Context, reader client.Reader, fallback string) (string, error) {
	fromProperty, err := Read(ctx, reader)
	if err != nil {
		return "", err
	}
	id := fromProperty
	switch {
	case fromProperty == "" && fallback == "":
		return "", fmt.Errorf("no cluster id: ClusterProperty %s does not exist and no fallback id is configured", PropertyName)
	case fromProperty == "":
		id = fallback
	case fallback != "" && fallback != fromProperty:
		return "", fmt.Errorf("configured cluster id %q differs from ClusterProperty %s value %q", fallback, PropertyName, fromProperty)
	}
	if err := Validate(id); err != nil {
		return "", err
	}
	return id, nil
}

// Read returns the value of the ClusterProperty, or "" when it or its CRD does not exist.
func Read(ctx context.Context, reader client.Reader) (string, error) {
	property := &unstructured.Unstructured{}
	property.SetGroupVersionKind(GroupVersionKind)
	err := reader.Get(ctx, client.ObjectKey{Name: PropertyName}, property)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading ClusterProperty %s: %w", PropertyName, err)
	}
	value, _, err := unstructured.NestedString(property.Object, "spec", "value")
	if err != nil {
		return "", fmt.Errorf("ClusterProperty %s: %w", PropertyName, err)
	}
	return value, nil
}

// Ensure creates the ClusterProperty with id, or checks that an existing one agrees.
func Ensure(ctx context.Context, c client.Client, id string) error {
	if err := Validate(id); err != nil {
		return err
	}
	existing, err := Read(ctx, c)
	if err != nil {
		return err
	}
	if existing != "" {
		if existing != id {
			return fmt.Errorf("ClusterProperty %s already holds %q, not %q", PropertyName, existing, id)
		}
		return nil
	}
	property := &unstructured.Unstructured{}
	property.SetGroupVersionKind(GroupVersionKind)
	property.SetName(PropertyName)
	if err := unstructured.SetNestedField(property.Object, id, "spec", "value"); err != nil {
		return err
	}
	if err := c.Create(ctx, property); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterProperty %s: %w", PropertyName, err)
	}
	return nil
}

// ReadAll returns every ClusterProperty of the cluster, name to value: what cluster selectors
// (KEP-5939) match. It is empty when the CRD is not installed.
func ReadAll(ctx context.Context, reader client.Reader) (map[string]string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(GroupVersionKind.GroupVersion().WithKind(GroupVersionKind.Kind + "List"))
	err := reader.List(ctx, list)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return map[string]string{}, nil
	case err != nil:
		return nil, fmt.Errorf("listing ClusterProperties: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for i := range list.Items {
		if value, found, err := unstructured.NestedString(list.Items[i].Object, "spec", "value"); err == nil && found {
			out[list.Items[i].GetName()] = value
		}
	}
	return out, nil
}
