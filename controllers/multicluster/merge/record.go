package merge

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
)

// ExportError says why a ServiceExport cannot be published. Reason is the reason of the
// export's Valid=False condition and Message a human explanation for it.
type ExportError struct {
	Reason  mcsv1beta1.ServiceExportConditionReason
	Message string
}

func (e *ExportError) Error() string {
	return string(e.Reason) + ": " + e.Message
}

// Valid=False reasons for exported metadata that no ServiceImport could carry. The MCS API
// defines none (its CRD takes any map), so the names follow its Invalid<Field> pattern.
const (
	ReasonInvalidExportedLabels      mcsv1beta1.ServiceExportConditionReason = "InvalidExportedLabels"
	ReasonInvalidExportedAnnotations mcsv1beta1.ServiceExportConditionReason = "InvalidExportedAnnotations"
)

// ReasonInvalidClusterSelector is KEP-5939's Valid=False reason for cluster selectors that do
// not parse or validate (package clusterselect).
const ReasonInvalidClusterSelector mcsv1beta1.ServiceExportConditionReason = "InvalidClusterSelector"

// maxInvalidMessageBytes keeps a Valid condition readable however many entries are wrong.
const maxInvalidMessageBytes = 1024

// ValidateExportedMetadata says why exportedLabels or exportedAnnotations cannot be the labels
// or annotations of a ServiceImport, or returns nil. Published, they would make every member's
// ServiceImport write fail, and so stop the import of every cluster's export of the Service
// (the oldest export's labels win); so such an export is refused instead, and importers skip
// a record that carries them.
func ValidateExportedMetadata(labels, annotations map[string]string) *ExportError {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	// Key by key, in order, so that the message names the offending label.
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		path := spec.Child("exportedLabels").Key(k)
		errs = append(errs, metav1validation.ValidateLabelName(k, path)...)
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, field.Invalid(path, labels[k], msg))
		}
	}
	if len(errs) > 0 {
		return &ExportError{Reason: ReasonInvalidExportedLabels, Message: truncate(errs.ToAggregate().Error(), maxInvalidMessageBytes)}
	}
	if errs := apivalidation.ValidateAnnotations(annotations, spec.Child("exportedAnnotations")); len(errs) > 0 {
		return &ExportError{Reason: ReasonInvalidExportedAnnotations, Message: truncate(errs.ToAggregate().Error(), maxInvalidMessageBytes)}
	}
	return nil
}

// RecordFromService returns the record cluster clusterID publishes for export, whose Service
// (same namespace and name) is service, or nil when it does not exist. It fails with an
// *ExportError (reason NoService, InvalidServiceType, InvalidExportedLabels,
// InvalidExportedAnnotations or InvalidClusterSelector) when the export is not valid, and with
// a plain error when the arguments themselves are unusable.
func RecordFromService(clusterID string, export *mcsv1beta1.ServiceExport, service *corev1.Service) (Record, error) {
	if export == nil {
		return Record{}, errors.New("no ServiceExport given")
	}
	if clusterID == "" {
		return Record{}, errors.New("no cluster id given")
	}
	exportName := export.Namespace + "/" + export.Name
	switch {
	case service == nil:
		return Record{}, &ExportError{
			Reason:  mcsv1beta1.ServiceExportReasonNoService,
			Message: fmt.Sprintf("Service %s does not exist", exportName),
		}
	case service.Namespace != export.Namespace || service.Name != export.Name:
		return Record{}, &ExportError{
			Reason:  mcsv1beta1.ServiceExportReasonNoService,
			Message: fmt.Sprintf("Service %s/%s is not the Service of export %s", service.Namespace, service.Name, exportName),
		}
	case service.DeletionTimestamp != nil:
		// Publishing a Service that is going away would only resurrect it in other clusters.
		return Record{}, &ExportError{
			Reason:  mcsv1beta1.ServiceExportReasonNoService,
			Message: fmt.Sprintf("Service %s is being deleted", exportName),
		}
	}

	importType, err := importTypeOf(service)
	if err != nil {
		return Record{}, err
	}
	if invalid := ValidateExportedMetadata(export.Spec.ExportedLabels, export.Spec.ExportedAnnotations); invalid != nil {
		return Record{}, invalid
	}
	selectors, invalid := clusterSelectors(export, importType)
	if invalid != nil {
		return Record{}, invalid
	}

	return Record{
		ClusterID:                  clusterID,
		ExportCreationTimestamp:    *export.CreationTimestamp.DeepCopy(),
		ServiceNamespace:           export.Namespace,
		ServiceName:                export.Name,
		Type:                       importType,
		Ports:                      importPorts(service.Spec.Ports),
		SessionAffinity:            effectiveAffinity(service.Spec.SessionAffinity),
		SessionAffinityConfig:      service.Spec.SessionAffinityConfig.DeepCopy(),
		IPFamilies:                 slices.Clone(service.Spec.IPFamilies),
		InternalTrafficPolicy:      clonePointer(service.Spec.InternalTrafficPolicy),
		TrafficDistribution:        clonePointer(service.Spec.TrafficDistribution),
		ClusterTrafficDistribution: clusterTrafficDistribution(export),
		ClusterSelectors:           selectors,
		ExportedLabels:             maps.Clone(export.Spec.ExportedLabels),
		ExportedAnnotations:        maps.Clone(export.Spec.ExportedAnnotations),
	}, nil
}

// maxDistributionBytes is the record schema's limit for the preference, the same as for the
// Service's trafficDistribution.
const maxDistributionBytes = 253

// clusterTrafficDistribution reads the export's preference across clusters. An empty value is
// the same as none, so that clearing the annotation and deleting it publish the same record. A
// value longer than the record schema allows cannot be a known one, and publishing it would
// make the broker refuse the whole record: it is published as none, which is what an unknown
// value means anyway.
func clusterTrafficDistribution(export *mcsv1beta1.ServiceExport) *string {
	if v := export.Annotations[v1alpha1.AnnotationTrafficDistribution]; v != "" && len(v) <= maxDistributionBytes {
		return &v
	}
	return nil
}

// clusterSelectors reads the export's cluster selectors (KEP-5939), refusing the export when
// they do not parse or validate (InvalidClusterSelector) or its Service is headless, which the
// KEP excludes from cluster selection (InvalidServiceType): a headless import answers with Pod
// IPs and has no data path to steer.
func clusterSelectors(export *mcsv1beta1.ServiceExport, t mcsv1beta1.ServiceImportType) ([]v1alpha1.ClusterSelector, *ExportError) {
	value, ok := export.Annotations[v1alpha1.AnnotationClusterSelectors]
	if !ok || strings.TrimSpace(value) == "" {
		return nil, nil
	}
	selectors, err := clusterselect.Parse(value)
	if err == nil {
		err = clusterselect.Validate(selectors)
	}
	if err != nil {
		return nil, &ExportError{Reason: ReasonInvalidClusterSelector, Message: truncate(err.Error(), maxInvalidMessageBytes)}
	}
	if len(selectors) > 0 && t == mcsv1beta1.Headless {
		return nil, &ExportError{Reason: mcsv1beta1.ServiceExportReasonInvalidServiceType, Message: fmt.Sprintf(
			"Service %s/%s is headless, and cluster selection applies only to ClusterSetIP Services (KEP-5939): "+
				"remove the %s annotation to export it", export.Namespace, export.Name, v1alpha1.AnnotationClusterSelectors)}
	}
	return clusterselect.Clone(selectors), nil
}

// importTypeOf maps a Service to the ServiceImport type it exports as. ClusterIP "None" makes
// a Service headless whatever its type says.
func importTypeOf(service *corev1.Service) (mcsv1beta1.ServiceImportType, error) {
	switch service.Spec.Type {
	case corev1.ServiceTypeExternalName:
		return "", &ExportError{
			Reason:  mcsv1beta1.ServiceExportReasonInvalidServiceType,
			Message: fmt.Sprintf("Service %s/%s is of type ExternalName, which cannot be exported", service.Namespace, service.Name),
		}
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if service.Spec.ClusterIP == corev1.ClusterIPNone {
			return mcsv1beta1.Headless, nil
		}
		return mcsv1beta1.ClusterSetIP, nil
	default:
		return "", &ExportError{
			Reason:  mcsv1beta1.ServiceExportReasonInvalidServiceType,
			Message: fmt.Sprintf("Service %s/%s has the unknown type %q", service.Namespace, service.Name, service.Spec.Type),
		}
	}
}

// importPorts keeps what a consumer of the ServiceImport sees of each port; node ports and
// target ports stay local to the exporting cluster.
func importPorts(ports []corev1.ServicePort) []mcsv1beta1.ServicePort {
	if len(ports) == 0 {
		return nil
	}
	imported := make([]mcsv1beta1.ServicePort, len(ports))
	for i, p := range ports {
		imported[i] = mcsv1beta1.ServicePort{
			Name:        p.Name,
			Protocol:    effectiveProtocol(p.Protocol),
			AppProtocol: clonePointer(p.AppProtocol),
			Port:        p.Port,
		}
	}
	return imported
}
