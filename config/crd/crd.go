// Package crd embeds the CustomResourceDefinitions fleetslice ships, so that tests and
// `fleetslice up` install exactly the YAML a release applies with kustomize.
package crd

import _ "embed"

var (
	// ServiceExportRecordCRD is fleetslice.io's ServiceExportRecord, served by a ClusterSet's broker.
	//go:embed bases/fleetslice.io_serviceexportrecords.yaml
	ServiceExportRecordCRD []byte

	// ClusterPropertyCRD is about.k8s.io's ClusterProperty (KEP-2149), served by every member.
	//go:embed about/about.k8s.io_clusterproperties.yaml
	ClusterPropertyCRD []byte
)
