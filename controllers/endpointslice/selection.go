package endpointslice

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/selection"
)

// The decisions of which Services are served (package selection) and of their hints (package
// hints) live in pure packages, so that tools can re-run them without linking this reconciler.
// These names stay here for the manager's flags and the tests and benches outside the package
// that configure or check this controller.
const (
	// ManagedBy is the value of endpointslice.kubernetes.io/managed-by on the slices we own.
	ManagedBy = selection.ManagedBy
	// UpstreamManagedBy marks slices of kube-controller-manager's controller, adopted only with
	// Options.AdoptUpstreamSlices or for a Service opted in by SelectorAnnotation.
	UpstreamManagedBy = selection.UpstreamManagedBy
	// SelectorAnnotation opts a selector-less Service in (selection.Annotation).
	SelectorAnnotation = selection.Annotation
	// AnnotationTopologyMode set to Auto asks for CPU-proportional hints.
	AnnotationTopologyMode = hints.AnnotationTopologyMode
)

// ServiceScope chooses which Services this controller writes EndpointSlices for (Options.Services).
type ServiceScope = selection.Scope

// The scopes Options.Services takes.
const (
	ScopeAll     = selection.ScopeAll
	ScopeOptedIn = selection.ScopeOptedIn
)

// selectorOf is the Pod selector of a Service this controller serves, or nil; handlers use it to
// find the Services a Pod change can touch, and skip Services whose annotation does not parse
// (their sync reports it).
func (r *Reconciler) selectorOf(svc *corev1.Service) labels.Selector {
	s, err := selection.Of(svc, r.Options.Services)
	if err != nil {
		return nil
	}
	return s.Selector
}
