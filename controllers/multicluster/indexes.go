package multicluster

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// Field indexes. Broker objects are found by the exported Service ("namespace/name"), by the
// Service's namespace and by source cluster; local slices by the Service they belong to.
const (
	indexBrokerService   = "fleetslice.io/mcs-service"
	indexBrokerNamespace = "fleetslice.io/mcs-service-namespace"
	indexBrokerCluster   = "fleetslice.io/mcs-source-cluster"
	indexLocalSource     = "fleetslice.io/mcs-source-service"
	indexLocalImported   = "fleetslice.io/mcs-imported-service"
	// indexTrustedRecord finds a Service's records that are trustworthy, judged once when a
	// record arrives instead of by every sync that reads it: an import's sync runs once per
	// peer record and slice copy that arrives, and judging each record again was a tenth of
	// that sync's reading in a bulk start.
	indexTrustedRecord = "fleetslice.io/mcs-trusted-record"
)

func serviceKey(namespace, name string) string {
	return namespace + "/" + name
}

// brokerServiceOf returns the exported Service an object in the broker belongs to.
func brokerServiceOf(obj client.Object) (namespace, name string, ok bool) {
	l := obj.GetLabels()
	namespace, name = l[v1alpha1.LabelServiceNamespace], l[v1alpha1.LabelServiceName]
	return namespace, name, namespace != "" && name != ""
}

func brokerIndexes() map[string]client.IndexerFunc {
	return map[string]client.IndexerFunc{
		indexBrokerService: func(obj client.Object) []string {
			if ns, name, ok := brokerServiceOf(obj); ok {
				return []string{serviceKey(ns, name)}
			}
			return nil
		},
		indexBrokerNamespace: func(obj client.Object) []string {
			if ns, _, ok := brokerServiceOf(obj); ok {
				return []string{ns}
			}
			return nil
		},
		indexBrokerCluster: func(obj client.Object) []string {
			if c := obj.GetLabels()[v1alpha1.LabelSourceCluster]; c != "" {
				return []string{c}
			}
			return nil
		},
	}
}

// localSourceService is the Service a local, not multi-cluster, slice belongs to.
func localSourceService(obj client.Object) []string {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || sliceplan.IsOurs(slice) {
		return nil
	}
	if name := slice.Labels[discoveryv1.LabelServiceName]; name != "" {
		return []string{name}
	}
	return nil
}

// localImportedService is the ServiceImport an imported slice belongs to.
func localImportedService(obj client.Object) []string {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || !sliceplan.IsOurs(slice) {
		return nil
	}
	if name := slice.Labels[mcsv1beta1.LabelServiceName]; name != "" {
		return []string{name}
	}
	return nil
}

// trustedRecordService is the exported Service a trustworthy record speaks for.
func trustedRecordService(obj client.Object) []string {
	record, ok := obj.(*v1alpha1.ServiceExportRecord)
	if !ok || !trustworthy(record) {
		return nil
	}
	return []string{serviceKey(record.Spec.ServiceNamespace, record.Spec.ServiceName)}
}

type indexer interface {
	IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error
}

func addIndexes(ctx context.Context, local, brokerCache indexer) error {
	for name, fn := range brokerIndexes() {
		for _, obj := range []client.Object{&v1alpha1.ServiceExportRecord{}, &discoveryv1.EndpointSlice{}} {
			if err := brokerCache.IndexField(ctx, obj, name, fn); err != nil {
				return err
			}
		}
	}
	if err := brokerCache.IndexField(ctx, &v1alpha1.ServiceExportRecord{}, indexTrustedRecord, trustedRecordService); err != nil {
		return err
	}
	if err := local.IndexField(ctx, &discoveryv1.EndpointSlice{}, indexLocalSource, localSourceService); err != nil {
		return err
	}
	return local.IndexField(ctx, &discoveryv1.EndpointSlice{}, indexLocalImported, localImportedService)
}
