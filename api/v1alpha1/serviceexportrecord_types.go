package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ServiceExportRecordSpec is what one member cluster publishes to the broker about one of its
// ServiceExports: exactly the properties that every member needs to merge the ServiceImport,
// so that all members compute the same import from the same records.
type ServiceExportRecordSpec struct {
	// clusterID is the ClusterSet-unique id of the exporting cluster. It is also the value of
	// the multicluster.kubernetes.io/source-cluster label, hence the label-value limits.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`
	ClusterID string `json:"clusterID"`

	// exportCreationTimestamp is the creationTimestamp of the ServiceExport in its own cluster.
	// The oldest export wins every conflict, so this is copied rather than using the record's age.
	ExportCreationTimestamp metav1.Time `json:"exportCreationTimestamp"`

	// serviceNamespace is the namespace of the exported Service (namespace sameness applies).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ServiceNamespace string `json:"serviceNamespace"`

	// serviceName is the name of the exported Service and of its ServiceExport.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ServiceName string `json:"serviceName"`

	// type is Headless for a Service with clusterIP None and ClusterSetIP otherwise.
	// +kubebuilder:validation:Enum=ClusterSetIP;Headless
	Type mcsv1beta1.ServiceImportType `json:"type"`

	// ports are the Service's ports as the ServiceImport exposes them.
	// +listType=atomic
	// +optional
	Ports []mcsv1beta1.ServicePort `json:"ports,omitempty"`

	// sessionAffinity is the Service's session affinity.
	// +kubebuilder:validation:Enum=ClientIP;None
	// +optional
	SessionAffinity corev1.ServiceAffinity `json:"sessionAffinity,omitempty"`

	// sessionAffinityConfig is the Service's session affinity configuration.
	// +optional
	SessionAffinityConfig *corev1.SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`

	// ipFamilies are the Service's IP families, primary first.
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:Enum=IPv4;IPv6
	// +listType=atomic
	// +optional
	IPFamilies []corev1.IPFamily `json:"ipFamilies,omitempty"`

	// internalTrafficPolicy is the Service's internal traffic policy.
	// +kubebuilder:validation:Enum=Cluster;Local
	// +optional
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`

	// trafficDistribution is the Service's traffic distribution preference.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	TrafficDistribution *string `json:"trafficDistribution,omitempty"`

	// clusterTrafficDistribution is the ServiceExport's fleetslice.io/traffic-distribution
	// annotation: the exporter's preference for where clients across the ClusterSet are
	// served (PreferSameCluster), merged across exporters like trafficDistribution.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ClusterTrafficDistribution *string `json:"clusterTrafficDistribution,omitempty"`

	// clusterSelectors is the ServiceExport's fleetslice.io/cluster-selectors annotation
	// (KEP-5939's clusterSelectors): an ordered list of cluster selectors, merged across
	// exporters like trafficDistribution.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ClusterSelectors []ClusterSelector `json:"clusterSelectors,omitempty"`

	// exportedLabels are the ServiceExport's spec.exportedLabels.
	// +optional
	ExportedLabels map[string]string `json:"exportedLabels,omitempty"`

	// exportedAnnotations are the ServiceExport's spec.exportedAnnotations.
	// +optional
	ExportedAnnotations map[string]string `json:"exportedAnnotations,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=svcexrec
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="Service-Namespace",type=string,JSONPath=`.spec.serviceNamespace`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.serviceName`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`,priority=1
// +kubebuilder:printcolumn:name="Exported",type=date,JSONPath=`.spec.exportCreationTimestamp`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ServiceExportRecord is one member cluster's published view of one of its ServiceExports.
// It lives in the broker namespace of a ClusterSet, named and labelled by the rules of
// package controllers/multicluster/names, and only the exporting cluster may write it.
type ServiceExportRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ServiceExportRecordSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// ServiceExportRecordList is a list of ServiceExportRecords.
type ServiceExportRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceExportRecord `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ServiceExportRecord{}, &ServiceExportRecordList{})
}
