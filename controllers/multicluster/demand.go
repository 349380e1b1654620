package multicluster

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// nodeDemand returns the Lease renewer's demand function: the member's Node CPU read from the
// manager's cache (the EndpointSlice controller watches Nodes anyway). Peers divide a Service's
// traffic across clusters by it, as zone hints divide it across zones.
func nodeDemand(nodes client.Reader) func(ctx context.Context) map[string]string {
	return func(ctx context.Context) map[string]string {
		list := &corev1.NodeList{}
		if err := nodes.List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing Nodes to publish this member's CPU; keeping the last published value")
			return nil
		}
		ptrs := make([]*corev1.Node, len(list.Items))
		for i := range list.Items {
			ptrs[i] = &list.Items[i]
		}
		return locality.CPUFromNodes(ptrs).Annotations()
	}
}

// demandAnnotations merges the current demand into a Lease's annotations. When the demand
// cannot be read, the last published value stays: peers keep allocating by it rather than
// treating this member as one without clients.
func (r *leaseRenewer) demandAnnotations(ctx context.Context, have map[string]string) map[string]string {
	if r.demand == nil {
		return have
	}
	now := r.demand(ctx)
	if now == nil {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, allocation.AnnotationZoneMilliCPU)
	maps.Copy(out, now)
	return out
}
