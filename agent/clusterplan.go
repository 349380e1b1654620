package agent

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/agent/selection"
	"github.com/fleetslice/fleetslice/api/allocation"
)

// clusterPlan reads this node's cluster's row of the cluster allocation the import controller
// publishes on a derived Service. Only a derived Service of a ServiceImport counts: on any other
// Service the annotation was not written by the controller. A missing cluster id, a missing
// row or an allocation that does not validate means no plan, and the Service is programmed as
// any other (spread over all endpoints, following hints), which is what it did before.
func clusterPlan(svc *corev1.Service, node selection.Node) (selection.ClusterPlan, bool) {
	raw := svc.Annotations[allocation.Annotation]
	if _, owned := importOf(svc); raw == "" || !owned || node.Cluster == "" {
		return selection.ClusterPlan{}, false
	}
	a, err := allocation.Parse(raw)
	if err != nil {
		return selection.ClusterPlan{}, false
	}
	row, ok := a.For(node.Cluster)
	if !ok {
		return selection.ClusterPlan{}, false
	}
	plan := selection.ClusterPlan{Local: row.Local, Spill: shares(row.Spill)}
	for _, z := range row.Zones {
		plan.Zones = append(plan.Zones, selection.ZoneShare{Zone: z.Zone, InZone: z.InZone, OtherZones: shares(z.OtherZones)})
	}
	for _, s := range row.Spill {
		if dest, ok := a.For(s.To); ok && len(dest.Intake) > 0 {
			if plan.Intake == nil {
				plan.Intake = map[string][]selection.Share{}
			}
			plan.Intake[s.To] = shares(dest.Intake)
		}
	}
	return plan, true
}

func shares(in []allocation.Share) []selection.Share {
	if len(in) == 0 {
		return nil
	}
	out := make([]selection.Share, len(in))
	for i, s := range in {
		out[i] = selection.Share{To: s.To, Share: s.Share}
	}
	return out
}

// weightedEndpoints follows plan for cluster-policy traffic: the ready endpoints weighted by
// selection.Weigh, quantized into map elements. It returns nil when nothing is ready, and the
// caller keeps Select's answer (serving terminating endpoints, or none).
func weightedEndpoints(candidates []selection.Endpoint, plan selection.ClusterPlan, addrs []netip.AddrPort, node selection.Node) []dataplane.Endpoint {
	chosen, _ := selection.Weigh(candidates, plan, node)
	if len(chosen) == 0 {
		return nil
	}
	s := make([]float64, len(chosen))
	for i, w := range chosen {
		s[i] = w.Share
	}
	weights := selection.Quantize(s, selection.DefaultWeightBudget)
	out := make([]dataplane.Endpoint, 0, len(chosen))
	for i, w := range chosen {
		j, err := strconv.Atoi(w.Endpoint.Address)
		if err != nil || j < 0 || j >= len(addrs) || weights[i] == 0 {
			continue
		}
		out = append(out, dataplane.Endpoint{Addr: addrs[j], Local: node.Name != "" && w.Endpoint.NodeName == node.Name, Weight: weights[i]})
	}
	return out
}
