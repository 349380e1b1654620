package sliceplan

import (
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

const (
	// ManagedBy marks every EndpointSlice the multi-cluster controllers write, in the broker and
	// in members. It must not be the upstream controller's value, or kube-controller-manager
	// would adopt or delete them.
	ManagedBy = "mcs-controller.fleetslice.io"
	// AnnotationSourceSlice names the EndpointSlice in the exporting cluster that a broker copy
	// or an imported slice was made from.
	AnnotationSourceSlice = "fleetslice.io/source-endpointslice"
	// LabelHeadless is the upstream label that tells proxies to skip a headless Service's slices.
	LabelHeadless = "service.kubernetes.io/headless"
)

// IsOurs reports whether a slice was written by the multi-cluster controllers.
func IsOurs(slice *discoveryv1.EndpointSlice) bool {
	return slice != nil && slice.Labels[discoveryv1.LabelManagedBy] == ManagedBy
}

// SourceSlices returns the local slices that make up a Service's own endpoints, by name:
// every slice labelled with the Service's name except those the multi-cluster controllers
// wrote and those being deleted.
func SourceSlices(service string, candidates []discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(candidates))
	for i := range candidates {
		s := &candidates[i]
		if s.Labels[discoveryv1.LabelServiceName] != service || IsOurs(s) || s.DeletionTimestamp != nil {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// BrokerCopies returns the copies cluster publishes to brokerNamespace for the local slices of
// the Service namespace/service. A copy keeps the address type, ports and endpoints (zones,
// hints, hostnames and conditions included) and drops what only means something in the
// source cluster: owner references, node names and target references.
func BrokerCopies(cluster, brokerNamespace, namespace, service string, sources []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, 0, len(sources))
	for _, src := range sources {
		labels := names.RecordLabels(cluster, namespace, service)
		labels[discoveryv1.LabelManagedBy] = ManagedBy
		out = append(out, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   brokerNamespace,
				Name:        names.BrokerCopyName(cluster, namespace, src.Name),
				Labels:      labels,
				Annotations: map[string]string{AnnotationSourceSlice: src.Name},
			},
			AddressType: src.AddressType,
			Endpoints:   copyEndpoints(src.Endpoints, false),
			Ports:       copyPorts(src.Ports),
		})
	}
	return out
}

// copyEndpoints deep-copies endpoints; keepLocal keeps the node name and target reference,
// which only make sense in the cluster the endpoints live in.
func copyEndpoints(in []discoveryv1.Endpoint, keepLocal bool) []discoveryv1.Endpoint {
	if len(in) == 0 {
		return []discoveryv1.Endpoint{}
	}
	out := make([]discoveryv1.Endpoint, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
		if !keepLocal {
			out[i].NodeName = nil
			out[i].TargetRef = nil
		}
		out[i].DeprecatedTopology = nil
	}
	return out
}

func copyPorts(in []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	if len(in) == 0 {
		return nil
	}
	out := make([]discoveryv1.EndpointPort, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// Source is one source slice of an import, from the broker or (for this cluster's own
// endpoints) from the local cluster.
type Source struct {
	Cluster string
	// Name is the slice's name in its source cluster.
	Name  string
	Slice *discoveryv1.EndpointSlice
	// Local is set for this cluster's own slices, whose node names and target references
	// still mean something here.
	Local bool
}

// SourcesFromBroker reads broker copies back into import sources, keeping only those of the
// given clusters. Copies without the source-cluster label or source annotation are skipped.
func SourcesFromBroker(copies []discoveryv1.EndpointSlice, clusters []string) []Source {
	out := make([]Source, 0, len(copies))
	for i := range copies {
		c := &copies[i]
		cluster := c.Labels[mcsv1beta1.LabelSourceCluster]
		name := c.Annotations[AnnotationSourceSlice]
		if cluster == "" || name == "" || !slices.Contains(clusters, cluster) || c.DeletionTimestamp != nil {
			continue
		}
		out = append(out, Source{Cluster: cluster, Name: name, Slice: c})
	}
	return out
}

// LocalSources turns this cluster's own slices into import sources.
func LocalSources(cluster string, local []*discoveryv1.EndpointSlice) []Source {
	out := make([]Source, 0, len(local))
	for _, s := range local {
		out = append(out, Source{Cluster: cluster, Name: s.Name, Slice: s, Local: true})
	}
	return out
}
