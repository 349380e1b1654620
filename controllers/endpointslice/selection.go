package endpointslice

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// SelectorAnnotation opts a Service into this controller's EndpointSlices where
// kube-controller-manager's own EndpointSlice controller keeps running, as on EKS, GKE and AKS:
// the Service has no spec.selector, so kube-controller-manager leaves it alone, and carries its
// Pod selector here instead, in the form `kubectl get -l` takes for equality ("app=web,tier=front").
const SelectorAnnotation = "fleetslice.io/selector"

// ServiceScope chooses which Services this controller writes EndpointSlices for.
type ServiceScope string

const (
	// ScopeAll serves every Service with a selector, and the opted-in ones: the cluster runs
	// without kube-controller-manager's EndpointSlice controller.
	ScopeAll ServiceScope = "all"
	// ScopeOptedIn serves only Services opted in with SelectorAnnotation, so kube-controller-manager's
	// controller keeps serving every other Service beside this one.
	ScopeOptedIn ServiceScope = "opted-in"
)

// Set parses a flag value.
func (s *ServiceScope) Set(v string) error {
	switch ServiceScope(v) {
	case ScopeAll, ScopeOptedIn:
		*s = ServiceScope(v)
		return nil
	}
	return fmt.Errorf("must be %q or %q, got %q", ScopeAll, ScopeOptedIn, v)
}

func (s *ServiceScope) String() string { return string(*s) }

// selection is which Pods back a Service's slices of ours: none when selector is nil. ignored
// explains an annotation this controller does not honour, for a Warning event. adoptUpstream is
// set for a Service opted in by annotation: kube-controller-manager never writes slices for a
// Service without spec.selector, so any of its slices there are left from before the Service
// was opted in, frozen, and taken over in place (relabelled in the update that brings them up to
// date) rather than left beside ours.
type selection struct {
	selector      labels.Selector
	ignored       string
	adoptUpstream bool
}

// selectionOf decides whether a Service gets EndpointSlices from this controller under scope, and
// with which Pod selector. An annotation that does not parse is an error: the caller keeps the
// Service's slices as they are rather than deleting them over a typo.
func selectionOf(svc *corev1.Service, scope ServiceScope) (selection, error) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return selection{}, nil
	}
	value, annotated := svc.Annotations[SelectorAnnotation]
	if svc.Spec.Selector != nil {
		var s selection
		if scope != ScopeOptedIn {
			s.selector = labels.SelectorFromValidatedSet(svc.Spec.Selector)
		}
		if annotated {
			s.ignored = fmt.Sprintf("the Service has spec.selector, so %s is ignored", SelectorAnnotation)
			if scope == ScopeOptedIn {
				s.ignored += " and kube-controller-manager serves it; remove spec.selector to opt it in"
			}
		}
		return s, nil
	}
	if !annotated {
		return selection{}, nil
	}
	set, err := labels.ConvertSelectorToLabelsMap(value)
	if err != nil {
		return selection{}, fmt.Errorf("annotation %s=%q is not a selector of key=value pairs: %w", SelectorAnnotation, value, err)
	}
	if len(set) == 0 {
		return selection{}, fmt.Errorf("annotation %s is empty; it must name at least one key=value pair", SelectorAnnotation)
	}
	return selection{selector: labels.SelectorFromValidatedSet(set), adoptUpstream: true}, nil
}

// selectorOf is the Pod selector of a Service this controller serves, or nil; handlers use it to
// find the Services a Pod change can touch, and skip Services whose annotation does not parse
// (their sync reports it).
func (r *Reconciler) selectorOf(svc *corev1.Service) labels.Selector {
	s, err := selectionOf(svc, r.Options.Services)
	if err != nil {
		return nil
	}
	return s.selector
}
