package builders

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ServiceExportWrapper builds a ServiceExport.
type ServiceExportWrapper struct{ mcsv1beta1.ServiceExport }

// MakeServiceExport returns a ServiceExport of the Service namespace/name: the export names
// the Service it exports, so it has nothing else to set.
func MakeServiceExport(namespace, name string) *ServiceExportWrapper {
	return &ServiceExportWrapper{mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// Obj returns the ServiceExport itself: later changes through w show in it.
func (w *ServiceExportWrapper) Obj() *mcsv1beta1.ServiceExport { return &w.ServiceExport }

// Label sets one label.
func (w *ServiceExportWrapper) Label(key, value string) *ServiceExportWrapper {
	w.Labels = set(w.Labels, key, value)
	return w
}

// Annotation sets one annotation; fleetslice reads its export options (traffic distribution,
// locality) from annotations.
func (w *ServiceExportWrapper) Annotation(key, value string) *ServiceExportWrapper {
	w.Annotations = set(w.Annotations, key, value)
	return w
}

// ServiceImportWrapper builds a ServiceImport.
type ServiceImportWrapper struct{ mcsv1beta1.ServiceImport }

// MakeServiceImport returns a ClusterSetIP ServiceImport with no IPs and no ports; the type is
// set because the CRD requires one and ClusterSetIP is what an exported ClusterIP Service gives.
func MakeServiceImport(namespace, name string) *ServiceImportWrapper {
	return &ServiceImportWrapper{mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP},
	}}
}

// Obj returns the ServiceImport itself: later changes through w show in it.
func (w *ServiceImportWrapper) Obj() *mcsv1beta1.ServiceImport { return &w.ServiceImport }

// Headless makes the import Headless.
func (w *ServiceImportWrapper) Headless() *ServiceImportWrapper {
	w.Spec.Type = mcsv1beta1.Headless
	return w
}

// Type sets the import type.
func (w *ServiceImportWrapper) Type(t mcsv1beta1.ServiceImportType) *ServiceImportWrapper {
	w.Spec.Type = t
	return w
}

// IPs sets the clusterset IPs.
func (w *ServiceImportWrapper) IPs(ips ...string) *ServiceImportWrapper {
	w.Spec.IPs = ips
	return w
}

// Port appends a port.
func (w *ServiceImportWrapper) Port(name string, protocol corev1.Protocol, port int32) *ServiceImportWrapper {
	w.Spec.Ports = append(w.Spec.Ports, mcsv1beta1.ServicePort{Name: name, Protocol: protocol, Port: port})
	return w
}
