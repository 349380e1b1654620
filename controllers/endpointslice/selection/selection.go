// Package selection decides what the EndpointSlice controller serves: which Services get
// EndpointSlices from it, with which Pod selector, and which slices are its own to write. It is
// kept apart from the reconciler so that tools explaining a decision (internal/ops/explain)
// re-run this very code without linking a client.
//
// Everything here is pure: no clients, no clocks, no global state.
package selection

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const (
	// ManagedBy is the value of endpointslice.kubernetes.io/managed-by on the slices the
	// controller owns.
	ManagedBy = "endpointslice-controller.fleetslice.io"
	// UpstreamManagedBy marks slices of kube-controller-manager's controller, which the
	// controller takes over only when told to, or for a Service opted in by Annotation
	// (Selection.AdoptUpstream).
	UpstreamManagedBy = "endpointslice-controller.k8s.io"
)

// Annotation opts a Service into the controller's EndpointSlices where kube-controller-manager's
// own EndpointSlice controller keeps running, as on EKS, GKE and AKS: the Service has no
// spec.selector, so kube-controller-manager leaves it alone, and carries its Pod selector here
// instead, in the form `kubectl get -l` takes for equality ("app=web,tier=front").
const Annotation = "fleetslice.io/selector"

// Scope chooses which Services the controller writes EndpointSlices for.
type Scope string

const (
	// ScopeAll serves every Service with a selector, and the opted-in ones: the cluster runs
	// without kube-controller-manager's EndpointSlice controller. It is the default.
	ScopeAll Scope = "all"
	// ScopeOptedIn serves only Services opted in with Annotation, so kube-controller-manager's
	// controller keeps serving every other Service beside this one.
	ScopeOptedIn Scope = "opted-in"
)

// Set parses a flag value.
func (s *Scope) Set(v string) error {
	switch Scope(v) {
	case ScopeAll, ScopeOptedIn:
		*s = Scope(v)
		return nil
	}
	return fmt.Errorf("must be %q or %q, got %q", ScopeAll, ScopeOptedIn, v)
}

func (s *Scope) String() string { return string(*s) }

// Basis says which of a Service's fields decided its Selection, so that a person asking why can
// be told without the decision building sentences on the controller's hot path.
type Basis int

const (
	// NoSelector: the Service has neither spec.selector nor Annotation; its slices, if any, are
	// written by hand.
	NoSelector Basis = iota
	// ExternalName: an ExternalName Service has no endpoints.
	ExternalName
	// SpecSelector: spec.selector selects the Pods.
	SpecSelector
	// LeftToUpstream: the Service has spec.selector but the scope is ScopeOptedIn, so
	// kube-controller-manager serves it.
	LeftToUpstream
	// Annotated: Annotation selects the Pods, or fails to parse (the error of Of).
	Annotated
)

// Selection is which Pods back a Service's slices of the controller: none when Selector is nil.
// Ignored explains an annotation the controller does not honour, for a Warning event.
// AdoptUpstream is set for a Service opted in by annotation: kube-controller-manager never writes
// slices for a Service without spec.selector, so any of its slices there are left from before the
// Service was opted in, frozen, and taken over in place (relabelled in the update that brings
// them up to date) rather than left beside the controller's.
type Selection struct {
	Selector      labels.Selector
	Ignored       string
	AdoptUpstream bool
	Basis         Basis
}

// Of decides whether a Service gets EndpointSlices from the controller under scope, and with
// which Pod selector. An annotation that does not parse is an error: the caller keeps the
// Service's slices as they are rather than deleting them over a typo.
func Of(svc *corev1.Service, scope Scope) (Selection, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return Selection{Basis: ExternalName}, nil
	}
	value, annotated := svc.Annotations[Annotation]
	if svc.Spec.Selector != nil {
		s := Selection{Basis: LeftToUpstream}
		if scope != ScopeOptedIn {
			s.Selector, s.Basis = labels.SelectorFromValidatedSet(svc.Spec.Selector), SpecSelector
		}
		if annotated {
			s.Ignored = fmt.Sprintf("the Service has spec.selector, so %s is ignored", Annotation)
			if scope == ScopeOptedIn {
				s.Ignored += " and kube-controller-manager serves it; remove spec.selector to opt it in"
			}
		}
		return s, nil
	}
	if !annotated {
		return Selection{Basis: NoSelector}, nil
	}
	set, err := labels.ConvertSelectorToLabelsMap(value)
	if err != nil {
		return Selection{Basis: Annotated}, fmt.Errorf("annotation %s=%q is not a selector of key=value pairs: %w", Annotation, value, err)
	}
	if len(set) == 0 {
		return Selection{Basis: Annotated}, fmt.Errorf("annotation %s is empty; it must name at least one key=value pair", Annotation)
	}
	return Selection{Selector: labels.SelectorFromValidatedSet(set), AdoptUpstream: true, Basis: Annotated}, nil
}
