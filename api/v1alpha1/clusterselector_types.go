package v1alpha1

// Cluster selection (KEP-5939, "Cluster Selection for Multi-Cluster Services"). The KEP adds an
// ordered clusterSelectors list to ServiceExport.spec and ServiceImport.spec, and the ordered
// results for each importer to ServiceImport.status. mcs-api v1beta1 has none of these fields
// yet, so fleetslice carries them in annotations whose values are the fields' JSON: moving to
// the fields later renames where the same JSON lives, nothing else. The types below have the
// KEP's shape and limits.

const (
	// AnnotationClusterSelectors on a ServiceExport holds its clusterSelectors as JSON, a list
	// of ClusterSelector. On a ServiceImport it holds the merged list (the oldest export's),
	// which the KEP puts in ServiceImport.spec.clusterSelectors.
	AnnotationClusterSelectors = "fleetslice.io/cluster-selectors"
	// AnnotationClusterSelectorResults on a ServiceImport holds, as JSON, what the KEP puts in
	// ServiceImport.status.clusterSelectorResults: for each selector, in order, the exporting
	// clusters it selects for this importing cluster.
	AnnotationClusterSelectorResults = "fleetslice.io/cluster-selector-results"
	// AnnotationClusterProperties on a member's broker Lease publishes the member's
	// ClusterProperties (name -> value, JSON), which every member's import controller matches
	// selectors against. The KEP leaves the mechanism to implementations; the Lease renewer
	// writes it on the renewal it writes anyway.
	AnnotationClusterProperties = "fleetslice.io/cluster-properties"

	// SameAsImporter in a selector's value stands for the importing cluster's own value of the
	// same property.
	SameAsImporter = "@SameAsImporter@"
	// MaxClusterSelectors is the KEP's limit on the length of the list.
	MaxClusterSelectors = 16
)

// ClusterSelector selects a set of clusters. It has exactly one criterion; the KEP's only one
// today is PropertySelector.
type ClusterSelector struct {
	// propertySelector selects clusters by their ClusterProperty values. "@SameAsImporter@" as a
	// value (in matchProperties, or in the values of an In or NotIn requirement) stands for the
	// importing cluster's value of that property.
	PropertySelector *PropertySelector `json:"propertySelector"`
}

// PropertySelector is metav1.LabelSelector with matchProperties in place of matchLabels,
// evaluated against ClusterProperty names and values. Its requirements are ANDed; an empty
// selector is invalid.
// +structType=atomic
type PropertySelector struct {
	// matchProperties: each entry is an In requirement with one value.
	// +optional
	MatchProperties map[string]string `json:"matchProperties,omitempty"`
	// matchExpressions are ClusterProperty requirements.
	// +listType=atomic
	// +optional
	MatchExpressions []PropertySelectorRequirement `json:"matchExpressions,omitempty"`
}

// PropertySelectorOperator is how a requirement relates a property to its values.
// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
type PropertySelectorOperator string

// The operators of metav1.LabelSelector.
const (
	PropertySelectorOpIn           PropertySelectorOperator = "In"
	PropertySelectorOpNotIn        PropertySelectorOperator = "NotIn"
	PropertySelectorOpExists       PropertySelectorOperator = "Exists"
	PropertySelectorOpDoesNotExist PropertySelectorOperator = "DoesNotExist"
)

// PropertySelectorRequirement is one requirement on a ClusterProperty.
type PropertySelectorRequirement struct {
	// key is the ClusterProperty's name.
	Key string `json:"key"`
	// operator is In, NotIn, Exists or DoesNotExist.
	Operator PropertySelectorOperator `json:"operator"`
	// values: at least one for In and NotIn, none for Exists and DoesNotExist.
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// ClusterSelectorResult is the clusters one selector selects for one importing cluster.
type ClusterSelectorResult struct {
	// clusters are cluster ids, as in ServiceImport.status.clusters, ascending.
	// +listType=atomic
	// +optional
	Clusters []string `json:"clusters,omitempty"`
}
