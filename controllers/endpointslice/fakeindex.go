package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
)

// FieldIndex is one field index the reconciler lists through. SetupWithManager registers them
// in the manager's cache; readers that stand in for that cache (a fake client, the benchmark's in-memory
// store) register them from FieldIndexes, so they answer the reconciler's field selectors the same
// way.
type FieldIndex struct {
	// Object is an empty object of the indexed kind.
	Object client.Object
	// Field is the index name used in client.MatchingFields.
	Field string
	// Extract returns the values an object is indexed under.
	Extract client.IndexerFunc
}

// FieldIndexes returns the field indexes SetupWithManager registers, with the same names and
// values.
func FieldIndexes() []FieldIndex {
	return []FieldIndex{
		{Object: &discoveryv1.EndpointSlice{}, Field: sliceServiceIndex, Extract: func(o client.Object) []string {
			if name := o.GetLabels()[discoveryv1.LabelServiceName]; name != "" {
				return []string{name}
			}
			return nil
		}},
		// On the Pod informer itself in the manager (SetupWithManager), where it indexes CachedPods.
		{Object: &corev1.Pod{}, Field: podNodeIndex, Extract: func(o client.Object) []string {
			pod := cachedPodOf(o)
			if pod == nil || pod.NodeName == "" {
				return nil
			}
			return []string{pod.NodeName}
		}},
		{Object: &corev1.Service{}, Field: serviceModeIndex, Extract: func(o client.Object) []string {
			svc, ok := o.(*corev1.Service)
			if !ok {
				return nil
			}
			mode, _ := hints.ModeOf(svc)
			return []string{string(mode)}
		}},
	}
}
