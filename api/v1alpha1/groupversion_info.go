// Package v1alpha1 holds fleetslice's own API types, served by the broker of a ClusterSet.
// +kubebuilder:object:generate=true
// +groupName=fleetslice.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "fleetslice.io", Version: "v1alpha1"}

	// SchemeBuilder collects the types of this package for registration in a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme registers the types of this package in a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
