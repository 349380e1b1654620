package sliceplan

import (
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// Target is the ServiceImport that imported slices belong to.
type Target struct {
	Namespace string
	Service   string
	// DerivedService names the derived Service of a ClusterSetIP import, which proxies find the
	// slices by; empty for a Headless import.
	DerivedService string
	// Owner references the ServiceImport; nil leaves the slices unowned.
	Owner *metav1.OwnerReference
}

// Imported returns the imported slices of target, one per source slice, ordered by name.
// Each carries the multi-cluster service-name and source-cluster labels, the derived
// Service's name for proxies, fleetslice's managed-by value and the ServiceImport as owner.
func Imported(target Target, sources []Source) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(sources))
	seen := map[string]bool{}
	for _, src := range sources {
		if src.Slice == nil || src.Cluster == "" || src.Name == "" {
			continue
		}
		name := names.ImportedName(target.Service, src.Cluster, src.Name)
		if seen[name] {
			continue
		}
		seen[name] = true
		labels := map[string]string{
			mcsv1beta1.LabelServiceName:   target.Service,
			mcsv1beta1.LabelSourceCluster: src.Cluster,
			discoveryv1.LabelManagedBy:    ManagedBy,
		}
		if target.DerivedService != "" {
			labels[discoveryv1.LabelServiceName] = target.DerivedService
		} else {
			labels[LabelHeadless] = ""
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   target.Namespace,
				Name:        name,
				Labels:      labels,
				Annotations: map[string]string{AnnotationSourceSlice: src.Name},
			},
			AddressType: src.Slice.AddressType,
			Endpoints:   copyEndpoints(src.Slice.Endpoints, src.Local),
			Ports:       copyPorts(src.Slice.Ports),
		}
		if target.Owner != nil {
			slice.OwnerReferences = []metav1.OwnerReference{*target.Owner}
		}
		out = append(out, slice)
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}
