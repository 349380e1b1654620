package multicluster

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// DefaultNamespace is the broker namespace a ClusterSet uses unless told otherwise.
const DefaultNamespace = "fleetslice-broker"

// Scheme registers what a member reads and writes in the broker: the core and discovery types
// (Leases, EndpointSlice copies) and ServiceExportRecords.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
