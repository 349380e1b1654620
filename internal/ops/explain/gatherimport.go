package explain

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// Broker is the ClusterSet's broker as explain may read it.
type Broker struct {
	Client    client.Reader
	Namespace string
}

// Peer is another member explain may read the Nodes of, when the broker is not at hand.
type Peer struct {
	Context string
	Client  client.Reader
}

// GatherImport reads one ServiceImport and everything its allocation depends on that the member,
// the broker (optional) and the peers (optional) show. now judges which broker Leases are live.
func GatherImport(ctx context.Context, member client.Reader, broker *Broker, peers []Peer, namespace, name string, settings Settings, now time.Time) (ImportInputs, error) {
	in := ImportInputs{Import: &mcsv1beta1.ServiceImport{}, Settings: settings, Broker: broker != nil}
	if err := member.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, in.Import); err != nil {
		switch {
		case meta.IsNoMatchError(err):
			return in, fmt.Errorf("the cluster serves no ServiceImports: the mcs-api CRDs are not installed (is fleetslice installed here?)")
		case apierrors.IsNotFound(err):
			return in, fmt.Errorf("ServiceImport %s/%s not found: no cluster of the ClusterSet exports a Service of that name, or this member has not joined", namespace, name)
		}
		return in, fmt.Errorf("reading ServiceImport %s/%s: %w", namespace, name, err)
	}
	var err error
	if in.Self, err = clusterid.Read(ctx, member); err != nil {
		return in, fmt.Errorf("reading this cluster's id: %w", err)
	}
	if err := gatherMemberSide(ctx, member, &in); err != nil {
		return in, err
	}
	if broker != nil {
		if err := gatherBroker(ctx, broker, &in, now); err != nil {
			return in, err
		}
	}
	known := map[string]bool{}
	for _, m := range in.Members {
		known[m.Cluster] = true
	}
	// Without the broker's Leases, each cluster's CPU is read from its own Nodes, which is what
	// its manager publishes on its Lease.
	self := in.Self
	if self == "" {
		self = "(this cluster)"
	}
	readers := append([]Peer{{Context: "this cluster", Client: member}}, peers...)
	for i, p := range readers {
		id := self
		if i > 0 {
			if id, err = clusterid.Read(ctx, p.Client); err != nil || id == "" {
				return in, fmt.Errorf("context %s: no ClusterSet id (ClusterProperty %s): has it joined?", p.Context, clusterid.PropertyName)
			}
		}
		if known[id] {
			continue
		}
		nodes := &corev1.NodeList{}
		if err := p.Client.List(ctx, nodes); err != nil {
			return in, fmt.Errorf("context %s: listing Nodes: %w", p.Context, err)
		}
		ptrs := make([]*corev1.Node, len(nodes.Items))
		for j := range nodes.Items {
			ptrs[j] = &nodes.Items[j]
		}
		in.Members = append(in.Members, MemberCPU{Cluster: id, CPU: locality.CPUFromNodes(ptrs), HasCPU: true, Source: "Nodes of " + p.Context})
		known[id] = true
	}
	return in, nil
}

func gatherMemberSide(ctx context.Context, member client.Reader, in *ImportInputs) error {
	ns, name := in.Import.Namespace, in.Import.Name
	derived := &corev1.Service{}
	switch err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.DerivedServiceName(ns, name)}, derived); {
	case err == nil:
		in.Derived = derived
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the derived Service: %w", err)
	}
	slices := &discoveryv1.EndpointSliceList{}
	if err := member.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: name, discoveryv1.LabelManagedBy: sliceplan.ManagedBy,
	}); err != nil {
		return fmt.Errorf("listing the imported EndpointSlices: %w", err)
	}
	for i := range slices.Items {
		in.Slices = append(in.Slices, &slices.Items[i])
	}
	export := &mcsv1beta1.ServiceExport{}
	switch err := member.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, export); {
	case err == nil:
		in.Export = export
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading the ServiceExport: %w", err)
	}
	return nil
}

// gatherBroker reads what the controller reads in the broker: the export records of the Service
// and the live members' Leases with the CPU they publish.
func gatherBroker(ctx context.Context, b *Broker, in *ImportInputs, now time.Time) error {
	records := &v1alpha1.ServiceExportRecordList{}
	if err := b.Client.List(ctx, records, client.InNamespace(b.Namespace), client.MatchingLabels{
		v1alpha1.LabelServiceNamespace: in.Import.Namespace, v1alpha1.LabelServiceName: in.Import.Name,
	}); err != nil {
		if meta.IsNoMatchError(err) {
			return fmt.Errorf("the broker serves no ServiceExportRecords: is it a fleetslice broker (dist/broker.yaml)?")
		}
		return fmt.Errorf("listing the broker's export records in %s: %w", b.Namespace, err)
	}
	for i := range records.Items {
		in.Records = append(in.Records, records.Items[i].Spec)
	}
	leases := &coordinationv1.LeaseList{}
	if err := b.Client.List(ctx, leases, client.InNamespace(b.Namespace)); err != nil {
		return fmt.Errorf("listing the broker's member Leases in %s: %w", b.Namespace, err)
	}
	for i := range leases.Items {
		// A Lease without a duration vouches for the manager's default, as the controller reads it.
		l, ok := liveness.FromLease(&leases.Items[i], multicluster.DefaultLeaseDuration)
		if !ok || !l.Expiry().After(now) {
			continue
		}
		m := MemberCPU{Cluster: l.Cluster, Source: "broker Lease " + leases.Items[i].Name}
		m.CPU, m.HasCPU = locality.NodeCPUFromAnnotations(leases.Items[i].Annotations)
		m.Properties, _ = clusterselect.ParseProperties(leases.Items[i].Annotations[v1alpha1.AnnotationClusterProperties])
		in.Members = append(in.Members, m)
	}
	return nil
}
