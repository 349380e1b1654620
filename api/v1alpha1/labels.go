package v1alpha1

import mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

// Labels on every object a member writes into the broker namespace, so that any member can
// list "everything for namespace/name" or "everything from cluster X" with a label selector.
const (
	// LabelSourceCluster carries the id of the cluster that wrote the object.
	LabelSourceCluster = mcsv1beta1.LabelSourceCluster
	// LabelServiceNamespace carries the namespace of the exported Service.
	LabelServiceNamespace = "fleetslice.io/service-namespace"
	// LabelServiceName carries the name of the exported Service.
	LabelServiceName = "fleetslice.io/service-name"
)

// AnnotationTrafficDistribution on a ServiceExport sets the Service's preference across the
// ClusterSet until the MCS API has a field for it. Its values follow the PreferSame* naming of
// the Service's trafficDistribution (KEP-3015), as the cluster-selection proposal (KEP-5939)
// leaves the name open; other values are carried and merged but mean no preference.
const AnnotationTrafficDistribution = "fleetslice.io/traffic-distribution"

// PreferSameCluster asks that clients be served by endpoints of their own cluster as long as
// those are not overloaded beyond the topology overload threshold.
const PreferSameCluster = "PreferSameCluster"

// AnnotationPublishingSince on a member's broker Lease says that the member is still publishing
// the exports it had when it started (the value is when it started, RFC 3339). Peers hold back
// new imports until it is gone, for a bounded time, so that each import is created once with
// every exporting cluster rather than rewritten as each one's record arrives.
const AnnotationPublishingSince = "fleetslice.io/publishing-exports-since"

// AnnotationFirstPublicationRecords on a member's broker Lease replaces AnnotationPublishingSince
// once that publication ended: how many records it had published by then. A peer that waited
// for the publication goes on waiting, within the same bound, until its broker cache holds at
// least that many records of the member: the Lease and the records reach it through different
// watches, and a peer that saw the Lease first created imports without the member's last
// records and wrote each one's status again as they arrived.
const AnnotationFirstPublicationRecords = "fleetslice.io/first-publication-records"
