package selection

import "math"

// ClusterPlan is where the clients of this node's cluster send one multi-cluster Service's
// traffic: this cluster's row of the allocation the import controller publishes on the derived
// Service (package api/allocation). The agent never recomputes the allocation; it only turns
// the row into per-endpoint shares with what it sees right now, so that a cluster whose
// endpoints all became not ready is left within one sync, before the controller republishes.
type ClusterPlan struct {
	// Local is the share served by endpoints of the node's own cluster (Node.Cluster).
	Local float64
	// Spill are the shares other clusters serve.
	Spill []Share
	// Zones, when set, splits the Local share by client zone.
	Zones []ZoneShare
	// Intake divides the traffic spilled to a cluster over that cluster's zones; a cluster
	// without an entry spreads it evenly over its endpoints.
	Intake map[string][]Share
}

// Share is a part of the traffic going To a cluster or a zone.
type Share struct {
	To    string
	Share float64
}

// ZoneShare is where the kept traffic of one client zone goes; InZone plus OtherZones is the
// plan's Local share.
type ZoneShare struct {
	Zone       string
	InZone     float64
	OtherZones []Share
}

// Weighted is a chosen endpoint with its share of the node's new connections.
type Weighted struct {
	Endpoint Endpoint
	Share    float64
}

// target is a share of traffic bound for a group of endpoints, split evenly among them.
type target struct {
	cluster string
	share   float64
	group   []int // indexes into the ready endpoints
}

// Weigh turns plan into the share of each ready endpoint for a node in node.Cluster. The
// result lists only ready endpoints, in input order, with shares that sum to 1:
//
//   - Traffic for a cluster is split evenly over its ready endpoints, or over the zones the
//     plan names (Zones for the own cluster's kept traffic by the node's zone, Intake for
//     spill) and then evenly within each zone. A named zone without ready endpoints falls back
//     to the whole cluster.
//   - A cluster the plan sends traffic to but that has no ready endpoint any more gives its
//     share to the other clusters of the plan, in proportion to their shares: failover within
//     one sync, without waiting for a new allocation.
//   - Clusters with a share of 0 receive nothing, unless no cluster of the plan has a ready
//     endpoint: then traffic spreads over every ready endpoint, and failover is true.
//
// It returns nil when no endpoint is ready (the caller then falls back to serving terminating
// endpoints, as Select does).
func Weigh(endpoints []Endpoint, plan ClusterPlan, node Node) (out []Weighted, failover bool) {
	ready, byCluster := readyByCluster(endpoints, node)
	if len(ready) == 0 {
		return nil, false
	}
	b := targetBuilder{endpoints: endpoints, byCluster: byCluster}
	b.add(node.Cluster, plan.Local, ownZoneShares(plan, node))
	for _, s := range plan.Spill {
		if s.To != node.Cluster {
			b.add(s.To, s.Share, plan.Intake[s.To])
		}
	}
	return weights(endpoints, ready, b.targets)
}

// readyByCluster returns the ready endpoints, all and by cluster.
func readyByCluster(endpoints []Endpoint, node Node) ([]int, map[string][]int) {
	var ready []int
	byCluster := map[string][]int{}
	for i, ep := range endpoints {
		if !ep.Ready {
			continue
		}
		ready = append(ready, i)
		c := ep.Cluster
		if c == "" {
			// Slices without a source cluster can only be this cluster's own.
			c = node.Cluster
		}
		byCluster[c] = append(byCluster[c], i)
	}
	return ready, byCluster
}

// ownZoneShares splits the node's own cluster's share by zone. Zone shares are of the
// client's traffic; targetBuilder.add wants them relative to Local.
func ownZoneShares(plan ClusterPlan, node Node) []Share {
	var own []Share
	for _, z := range plan.Zones {
		if z.Zone == node.Zone && node.Zone != "" && plan.Local > 0 {
			own = append(own, Share{To: z.Zone, Share: z.InZone / plan.Local})
			for _, o := range z.OtherZones {
				own = append(own, Share{To: o.To, Share: o.Share / plan.Local})
			}
		}
	}
	return own
}

type targetBuilder struct {
	endpoints []Endpoint
	byCluster map[string][]int
	targets   []target
}

// add splits share for cluster over zones (nil: the whole cluster); what finds no ready
// endpoint in its zone stays with the cluster as a whole.
func (b *targetBuilder) add(cluster string, share float64, zones []Share) {
	if !(share > 0) {
		return
	}
	group := b.byCluster[cluster]
	rest := share
	for _, z := range zones {
		s := math.Min(rest, share*z.Share)
		if g := b.inZone(group, z.To); len(g) > 0 && s > 0 {
			b.targets = append(b.targets, target{cluster, s, g})
			rest -= s
		}
	}
	if rest > 0 {
		b.targets = append(b.targets, target{cluster, rest, group})
	}
}

func (b *targetBuilder) inZone(group []int, zone string) []int {
	var out []int
	for _, i := range group {
		if b.endpoints[i].Zone == zone {
			out = append(out, i)
		}
	}
	return out
}

// weights spreads each target's share evenly over its endpoints. Failover: shares of clusters
// without ready endpoints go to the others in proportion, and with none served at all every
// ready endpoint gets an even share.
func weights(endpoints []Endpoint, ready []int, targets []target) (out []Weighted, failover bool) {
	var served float64
	for _, t := range targets {
		if len(t.group) > 0 {
			served += t.share
		}
	}
	w := make([]float64, len(endpoints))
	if served > 0 {
		for _, t := range targets {
			for _, i := range t.group {
				w[i] += t.share / served / float64(len(t.group))
			}
		}
	} else {
		failover = true
		for _, i := range ready {
			w[i] = 1 / float64(len(ready))
		}
	}
	for _, i := range ready {
		if w[i] > 0 {
			out = append(out, Weighted{Endpoint: endpoints[i], Share: w[i]})
		}
	}
	return out, failover
}

// DefaultWeightBudget is how many dispatch map elements Quantize aims at: shares are then
// expressed to within half a part in a thousand, and a Service's map stays small.
const DefaultWeightBudget = 1000

// Quantize turns shares into integer weights whose ratios approximate them, for a dataplane
// that spreads connections over repeated map elements. Each positive share gets at least 1,
// the weights are reduced by their common divisor (equal shares become all ones, the map an
// unweighted Service would have), and their sum stays within max(budget, n) + n for n shares.
func Quantize(shares []float64, budget int) []uint16 {
	budget = max(1, min(budget, math.MaxUint16/2))
	out := make([]uint16, len(shares))
	var sum float64
	for _, s := range shares {
		if s > 0 {
			sum += s
		}
	}
	if !(sum > 0) {
		for i := range out {
			out[i] = 1
		}
		return out
	}
	g := 0
	for i, s := range shares {
		w := 0
		if s > 0 {
			w = max(1, int(math.Round(s/sum*float64(budget))))
		}
		out[i] = uint16(w)
		if w > 0 {
			g = gcd(g, w)
		}
	}
	for i := range out {
		if g > 1 {
			out[i] /= uint16(g)
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
