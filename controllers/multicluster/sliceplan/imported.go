package sliceplan

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/names"
)

const (
	importedServicePartMax = 30
	importedClusterPartMax = 20
	importedDigestHexLen   = 12
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

// ImportedName is the deterministic name of the imported slice made from the slice sourceSlice
// of cluster, for the Service service. The readable part is cut short and the digest of the
// full inputs keeps names of different sources apart.
func ImportedName(service, cluster, sourceSlice string) string {
	digest := sha256.New()
	for _, part := range []string{service, cluster, sourceSlice} {
		digest.Write([]byte(strconv.Itoa(len(part))))
		digest.Write([]byte{':'})
		digest.Write([]byte(part))
	}
	sum := hex.EncodeToString(digest.Sum(nil))[:importedDigestHexLen]
	parts := make([]string, 0, 3)
	for _, p := range []struct {
		text string
		max  int
	}{{service, importedServicePartMax}, {cluster, importedClusterPartMax}} {
		if s := names.DNSLabelPart(p.text, p.max); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(append(parts, sum), "-")
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
		name := ImportedName(target.Service, src.Cluster, src.Name)
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
