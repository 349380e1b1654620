// Package selection decides which endpoints of a Service this node's dataplane
// should use. It follows kube-proxy's semantics (pkg/proxy/topology.go) so that
// a fleetslice node behaves exactly like a kube-proxy node would for the same
// EndpointSlices: topology hints are honoured only when every ready endpoint
// carries them, traffic policies restrict to node-local endpoints, and
// terminating-but-serving endpoints are a last resort.
//
// The function is pure: it reads only its arguments and never talks to an API
// server, so the agent can run it for every Service on every sync.
package selection

// Mode names the topology rule applied to cluster-policy traffic.
type Mode string

const (
	// ModeNone spreads traffic over every usable endpoint in the cluster.
	ModeNone Mode = ""
	// ModePreferSameZone keeps traffic in endpoints hinted for this node's zone.
	ModePreferSameZone Mode = "PreferSameZone"
	// ModePreferSameNode keeps traffic in endpoints hinted for this node.
	ModePreferSameNode Mode = "PreferSameNode"
)

// Service holds the traffic-relevant parts of a Service (for one port; the
// answer is the same for every port of a Service with the same endpoints).
type Service struct {
	// InternalTrafficLocal is spec.internalTrafficPolicy == Local.
	InternalTrafficLocal bool
	// ExternalTrafficLocal is spec.externalTrafficPolicy == Local.
	ExternalTrafficLocal bool
	// ExternallyAccessible is true when the Service has a NodePort, an
	// external IP or a load-balancer IP: such traffic may arrive from outside
	// the cluster, which is what externalTrafficPolicy governs.
	ExternallyAccessible bool
}

// UsesClusterEndpoints reports whether some traffic to the Service is spread
// cluster-wide. External traffic always needs the cluster list, even with
// externalTrafficPolicy Local, because traffic from pods and from the node
// itself to an external address is short-circuited to the cluster policy.
func (s Service) UsesClusterEndpoints() bool {
	return !s.InternalTrafficLocal || s.ExternallyAccessible
}

// UsesLocalEndpoints reports whether some traffic to the Service must stay on
// this node.
func (s Service) UsesLocalEndpoints() bool {
	return s.InternalTrafficLocal || (s.ExternalTrafficLocal && s.ExternallyAccessible)
}

// Endpoint is one address of an EndpointSlice with its conditions and hints.
type Endpoint struct {
	// Address identifies the endpoint for the caller (for example "ip:port").
	Address string
	// Ready, Serving and Terminating are the EndpointSlice conditions, with
	// unset conditions already resolved by the caller (unset ready/serving
	// mean true, unset terminating means false).
	Ready       bool
	Serving     bool
	Terminating bool
	// NodeName is the node hosting the endpoint; empty when unknown.
	NodeName string
	// Zone is the endpoint's zone; informational only, hints decide (and
	// Weigh, for the zones of a cluster allocation).
	Zone string
	// Cluster is the cluster an imported endpoint comes from (the slice's
	// multicluster.kubernetes.io/source-cluster label); empty otherwise.
	Cluster string
	// ZoneHints and NodeHints are hints.forZones and hints.forNodes.
	ZoneHints []string
	NodeHints []string
}

func (e Endpoint) servingTerminating() bool { return e.Serving && e.Terminating }

// Node is the node the agent runs on.
type Node struct {
	Name string
	// Zone is the topology.kubernetes.io/zone label, empty when the label is
	// missing. A node without a zone never uses zone hints.
	Zone string
	// Cluster is the ClusterSet id of the node's cluster; without it the
	// agent cannot tell its own cluster's imported endpoints and ignores
	// cluster allocations.
	Cluster string
}

func (n Node) hosts(e Endpoint) bool { return n.Name != "" && e.NodeName == n.Name }

// Result is the node's view of a Service's endpoints.
type Result struct {
	// Cluster lists the endpoints for cluster-policy traffic, after topology
	// filtering; nil when the Service never uses cluster policy.
	Cluster []Endpoint
	// Local lists this node's endpoints for node-local-policy traffic; nil
	// when the Service never uses local policy.
	Local []Endpoint
	// Topology is the hint rule that shaped Cluster.
	Topology Mode
	// HasLocalEndpoints reports whether this node hosts a usable (ready, or
	// serving and terminating) endpoint, whatever the policies say. Health
	// checks for externalTrafficPolicy Local answer from it.
	HasLocalEndpoints bool
	// HasAnyEndpoints reports whether a usable endpoint exists anywhere in
	// the cluster; when false the dataplane rejects connections instead of
	// dropping them.
	HasAnyEndpoints bool
}

// Select picks the endpoints this node uses for svc. The order of endpoints
// in each list follows the input order.
func Select(svc Service, endpoints []Endpoint, node Node) Result {
	var res Result
	for _, ep := range endpoints {
		usable := ep.Ready || ep.servingTerminating()
		if usable {
			res.HasAnyEndpoints = true
			if node.hosts(ep) {
				res.HasLocalEndpoints = true
			}
		}
	}
	if svc.UsesClusterEndpoints() {
		res.Topology = TopologyMode(endpoints, node)
		res.Cluster = filter(endpoints, func(ep Endpoint) bool {
			return ep.Ready && availableFor(ep, res.Topology, node)
		})
		if len(res.Cluster) == 0 {
			// Topology never removes every ready endpoint (the mode falls back
			// to none first), so an empty list means nothing is ready anywhere.
			res.Cluster = filter(endpoints, Endpoint.servingTerminating)
		}
	}

	if svc.UsesLocalEndpoints() {
		res.Local = filter(endpoints, func(ep Endpoint) bool {
			return node.hosts(ep) && ep.Ready
		})
		if len(res.Local) == 0 {
			res.Local = filter(endpoints, func(ep Endpoint) bool {
				return node.hosts(ep) && ep.servingTerminating()
			})
		}
	}
	return res
}

// TopologyMode returns the hint rule that applies on node: node hints when
// every ready endpoint has one and some name this node, otherwise zone hints
// under the same two conditions (and only when the node has a zone), otherwise
// none. Endpoints that are not ready do not take part in the decision.
func TopologyMode(endpoints []Endpoint, node Node) Mode {
	anyReady := false
	allNodeHinted, forThisNode := true, false
	allZoneHinted, forThisZone := true, false
	for _, ep := range endpoints {
		if !ep.Ready {
			continue
		}
		anyReady = true
		if len(ep.NodeHints) == 0 {
			allNodeHinted = false
		} else if node.Name != "" && contains(ep.NodeHints, node.Name) {
			forThisNode = true
		}
		if len(ep.ZoneHints) == 0 {
			allZoneHinted = false
		} else if node.Zone != "" && contains(ep.ZoneHints, node.Zone) {
			forThisZone = true
		}
	}
	switch {
	case !anyReady:
		return ModeNone
	case allNodeHinted && forThisNode:
		return ModePreferSameNode
	case allZoneHinted && forThisZone:
		return ModePreferSameZone
	default:
		return ModeNone
	}
}

func availableFor(ep Endpoint, mode Mode, node Node) bool {
	switch mode {
	case ModePreferSameNode:
		return contains(ep.NodeHints, node.Name)
	case ModePreferSameZone:
		return contains(ep.ZoneHints, node.Zone)
	default:
		return true
	}
}

func filter(endpoints []Endpoint, keep func(Endpoint) bool) []Endpoint {
	out := make([]Endpoint, 0, len(endpoints))
	for _, ep := range endpoints {
		if keep(ep) {
			out = append(out, ep)
		}
	}
	return out
}

func contains(list []string, want string) bool {
	for _, s := range list {
		if s == want {
			return true
		}
	}
	return false
}
