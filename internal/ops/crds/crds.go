// Package crds gathers the CustomResourceDefinitions fleetslice needs in a cluster, from the bytes
// their modules embed, so tests and `fleetslice up` install exactly what a release would.
package crds

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"

	fleetslicecrd "github.com/fleetslice/fleetslice/config/crd"
)

// MultiCluster returns the mcs-api ServiceExport and ServiceImport CRDs.
func MultiCluster() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(mcscrd.ServiceExportCRD, mcscrd.ServiceImportCRD)
}

func decode(docs ...[]byte) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(docs))
	for i, doc := range docs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(doc, crd); err != nil {
			return nil, fmt.Errorf("decoding embedded CRD #%d: %w", i, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Install creates or updates each CRD and waits until the API server serves it.
func Install(ctx context.Context, c client.Client, defs []*apiextensionsv1.CustomResourceDefinition) error {
	for _, def := range defs {
		want := def.DeepCopy()
		current := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKeyFromObject(want), current)
		switch {
		case apierrors.IsNotFound(err):
			if err := c.Create(ctx, want); err != nil {
				return fmt.Errorf("creating CRD %s: %w", want.Name, err)
			}
		case err != nil:
			return fmt.Errorf("reading CRD %s: %w", want.Name, err)
		default:
			want.ResourceVersion = current.ResourceVersion
			if err := c.Update(ctx, want); err != nil {
				return fmt.Errorf("updating CRD %s: %w", want.Name, err)
			}
		}
	}
	for _, def := range defs {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			current := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(def), current); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, cond := range current.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", def.Name, err)
		}
	}
	return nil
}

// Broker returns the CRDs a ClusterSet's broker serves: fleetslice's ServiceExportRecord.
func Broker() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(fleetslicecrd.ServiceExportRecordCRD)
}

// ClusterProperty returns the about.k8s.io ClusterProperty CRD (KEP-2149) members read their
// cluster id from.
func ClusterProperty() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return decode(fleetslicecrd.ClusterPropertyCRD)
}

// Member returns every CRD a member cluster serves: the mcs-api types and ClusterProperty.
func Member() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	mcs, err := MultiCluster()
	if err != nil {
		return nil, err
	}
	property, err := ClusterProperty()
	if err != nil {
		return nil, err
	}
	return append(mcs, property...), nil
}
