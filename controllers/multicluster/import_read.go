package multicluster

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// readOnly lists the cache's own objects instead of copies of them. A sync lists every slice,
// record and Lease of its Service, and copying them was a tenth of the manager's CPU in a bulk
// sync; nothing a sync lists is modified: the plans copy what they write, which
// TestPlanLeavesItsInputAsItFoundIt and the sliceplan tests hold them to. Single objects
// (Get) are still copied: the writers set their fields.
const readOnly = client.UnsafeDisableDeepCopy

// read gathers everything an import sync decides from, all from the caches: the broker's
// records and copies, the Leases' liveness and CPU, and the member's own objects.
func (r *importReconciler) read(ctx context.Context, key types.NamespacedName) (importplan.Input, error) {
	in := importplan.Input{Key: key, Locality: r.locality, Selection: r.selection, Self: r.self}
	var err error
	if in.Records, err = r.records(ctx, key); err != nil {
		return in, err
	}
	if len(in.Records) > 0 {
		namespace := &corev1.Namespace{}
		err := r.local.Get(ctx, client.ObjectKey{Name: key.Namespace}, namespace)
		in.NamespaceMissing = apierrors.IsNotFound(err)
		if err != nil && !in.NamespaceMissing {
			return in, fmt.Errorf("namespace: %w", err)
		}
		in.NamespaceTerminating = namespace.DeletionTimestamp != nil
		if in.NamespaceMissing || in.NamespaceTerminating {
			return in, nil
		}
	}
	if in.Import, err = getOptional(ctx, r.local, key, &mcsv1beta1.ServiceImport{}); err != nil {
		return in, err
	}
	if in.Import == nil {
		if err := r.readPublishing(ctx, &in); err != nil {
			return in, err
		}
	}
	if len(in.Records) > 0 && importplan.SkipReason(in) != "" {
		return in, nil // the plan writes nothing, whatever the rest says
	}
	derivedKey := types.NamespacedName{Namespace: key.Namespace, Name: names.DerivedServiceName(key.Namespace, key.Name)}
	if in.Derived, err = getOptional(ctx, r.local, derivedKey, &corev1.Service{}); err != nil {
		return in, err
	}
	imported := &discoveryv1.EndpointSliceList{}
	if err := r.local.List(ctx, imported, client.InNamespace(key.Namespace), client.MatchingFields{indexLocalImported: key.Name}, readOnly); err != nil {
		return in, fmt.Errorf("imported slices: %w", err)
	}
	in.Imported = imported.Items
	if len(in.Records) == 0 {
		return in, nil
	}
	return in, r.readExporters(ctx, &in)
}

// readPublishing reads what a new import waits for: the members still publishing their first
// exports, and, while this member is one, whether it exports the Service.
func (r *importReconciler) readPublishing(ctx context.Context, in *importplan.Input) error {
	in.Publishing, in.PublishingUnknown = r.members.Publishing(), !r.members.PublishingKnown()
	if !slices.Contains(in.Publishing, r.self) {
		return nil
	}
	export, err := getOptional(ctx, r.local, in.Key, &mcsv1beta1.ServiceExport{})
	in.ExportedHere = export != nil
	return err
}

// readExporters reads which exporters are live, their source slices and the live members' CPU.
func (r *importReconciler) readExporters(ctx context.Context, in *importplan.Input) error {
	in.Live = map[string]bool{}
	var live []string
	for _, rec := range in.Records {
		if r.members.IsLive(rec.ClusterID) && !in.Live[rec.ClusterID] {
			in.Live[rec.ClusterID] = true
			live = append(live, rec.ClusterID)
		}
	}
	var err error
	if in.Sources, err = r.importSources(ctx, in.Key, live); err != nil {
		return err
	}
	in.Members, err = r.liveMembers(ctx)
	return err
}

// getOptional reads one object; nil when it does not exist.
func getOptional[T client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, obj T) (T, error) {
	var none T
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("%T %s: %w", obj, key, err)
	}
	return obj, nil
}

// records returns the trustworthy broker records of one exported Service (see trustworthy).
func (r *importReconciler) records(ctx context.Context, key types.NamespacedName) ([]merge.Record, error) {
	list := &v1alpha1.ServiceExportRecordList{}
	if err := r.broker.List(ctx, list, client.InNamespace(r.brokerNamespace),
		client.MatchingFields{indexTrustedRecord: serviceKey(key.Namespace, key.Name)}, readOnly); err != nil {
		return nil, fmt.Errorf("broker records: %w", err)
	}
	out := make([]merge.Record, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, list.Items[i].Spec)
		}
	}
	return out, nil
}

// liveMembers returns every live member with the CPU and properties its Lease publishes.
func (r *importReconciler) liveMembers(ctx context.Context) ([]locality.Member, error) {
	leases := &coordinationv1.LeaseList{}
	if err := r.broker.List(ctx, leases, client.InNamespace(r.brokerNamespace), readOnly); err != nil {
		return nil, fmt.Errorf("broker Leases: %w", err)
	}
	return r.leases.live(leases.Items, r.members.IsLive), nil
}

// importSources returns the source slices of the live exporting clusters: this cluster's own
// local slices, read directly so that local endpoints do not wait for a round trip through the
// broker, and the peers' broker copies.
func (r *importReconciler) importSources(ctx context.Context, key types.NamespacedName, live []string) ([]sliceplan.Source, error) {
	var sources []sliceplan.Source
	peers := make([]string, 0, len(live))
	for _, c := range live {
		if c != r.self {
			peers = append(peers, c)
			continue
		}
		local := &discoveryv1.EndpointSliceList{}
		if err := r.local.List(ctx, local, client.InNamespace(key.Namespace), client.MatchingFields{indexLocalSource: key.Name}, readOnly); err != nil {
			return nil, fmt.Errorf("local source slices: %w", err)
		}
		sources = append(sources, sliceplan.LocalSources(r.self, sliceplan.SourceSlices(key.Name, local.Items))...)
	}
	if len(peers) > 0 {
		copies := &discoveryv1.EndpointSliceList{}
		if err := r.broker.List(ctx, copies, client.InNamespace(r.brokerNamespace),
			client.MatchingFields{indexBrokerService: serviceKey(key.Namespace, key.Name)}, readOnly); err != nil {
			return nil, fmt.Errorf("broker slice copies: %w", err)
		}
		sources = append(sources, sliceplan.SourcesFromBroker(copies.Items, peers)...)
	}
	return sources, nil
}
