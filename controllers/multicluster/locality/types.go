// Package locality decides, once per multi-cluster Service, which share of each cluster's
// traffic stays in the cluster and where the rest goes, so that clients use their own cluster
// (and zone) while no endpoint anywhere is expected to carry more than its fair share by more
// than the overload threshold. It is pure: the controllers publish its Result and every agent
// derives its choice from it, so the tests, the fuzzer and the simulator run the very decision
// the data path follows.
//
// Load model, the zone hints' (package controllers/topology) lifted to clusters. Cluster c
// sends a share of the Service's traffic equal to its share w_c/W of the ClusterSet's worker
// CPU; traffic that reaches a cluster (or zone) is split evenly over its ready endpoints. With N
// ready endpoints in the ClusterSet the fair share of one is 1/N, and the bound is
//
//	traffic reaching c / n_c <= (1+threshold) / N,
//
// that is cluster c can carry cap_c = (1+threshold) * n_c/N * W (in CPU units). Cluster c keeps
// all of its traffic exactly when n_c >= topology.MinimumHinted(w_c, W, N, threshold), the zone
// allocator's own minimum. The caps add up to (1+threshold)*W >= W, so whenever one endpoint
// is ready the bound can be met: a cluster keeps min(w_c, cap_c), the smallest spill there is,
// and what it cannot keep goes to the clusters with the most spare capacity, filled so that
// every receiving cluster ends at the same load per endpoint.
package locality

import (
	"fmt"

	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Zone is one zone of a cluster: the allocatable milli-CPU of its ready worker Nodes (its
// demand) and the Service's ready endpoints there (its capacity).
type Zone struct {
	Name      string
	MilliCPU  int64
	Endpoints int
}

// Cluster is one member of the ClusterSet as the allocation sees it. When Zones is set the
// cluster's totals are their sums, and non-zero MilliCPU or Endpoints must agree with them.
type Cluster struct {
	Name      string
	MilliCPU  int64
	Endpoints int
	Zones     []Zone
	// Tiers are this cluster's ordered cluster-selector results as an importing cluster
	// (KEP-5939): for each selector, the clusters it selects. Only AllocateTiers and FirstReady
	// read them.
	Tiers [][]string
}

// Options tune the allocation.
type Options struct {
	// OverloadThreshold is the largest tolerated expected load of one endpoint above its fair
	// share, as a fraction: the zone hints' flag, so both levels keep the same promise.
	OverloadThreshold float64
	// ReturnThreshold is the hysteresis: a cluster that spills more than it must keeps doing so
	// as long as taking the surplus back would load its endpoints above (1+ReturnThreshold) of
	// their fair share. Between 0 and OverloadThreshold.
	ReturnThreshold float64
}

// DefaultOptions returns the zone hints' default threshold (25%) and half of it to return.
func DefaultOptions() Options {
	return ForThreshold(topology.DefaultOptions().OverloadThreshold)
}

// ForThreshold returns the allocation's options for the zone hints' overload threshold t, the
// one bound both levels keep, with half of it to return. 0 means 0: no cluster spills more than
// it must, and any that does takes its surplus back at once.
func ForThreshold(t float64) Options {
	return Options{OverloadThreshold: t, ReturnThreshold: t / 2}
}

// Selection says how a Service with cluster selectors (KEP-5939) follows its tiers.
type Selection string

const (
	// SelectionBounded (the default): AllocateTiers, each level keeping what its endpoints
	// carry within the overload bound, spilling the least to the next.
	SelectionBounded Selection = "bounded"
	// SelectionFirstReady: the KEP's default, FirstReady, the first tier with a ready
	// endpoint takes all of a client's traffic whatever it can carry.
	SelectionFirstReady Selection = "first-ready"
)

// Validate refuses a selection that is neither.
func (s Selection) Validate() error {
	if s != SelectionBounded && s != SelectionFirstReady {
		return fmt.Errorf("cluster selection %q is neither %q nor %q", s, SelectionBounded, SelectionFirstReady)
	}
	return nil
}

// Mode says what kind of allocation a Result holds.
type Mode string

const (
	// Local: every cluster keeps all of its traffic.
	Local Mode = "Local"
	// Spill: at least one cluster sends some or all of its traffic to other clusters.
	Spill Mode = "Spill"
	// Spread: no cluster reported CPU, so demand is unknown: every cluster spreads over all
	// ready endpoints of the ClusterSet, which is what the Service does without a preference.
	Spread Mode = "Spread"
	// None: there is no allocation (no ready endpoint anywhere, or unusable input).
	None Mode = "None"
)

// Reason explains a Spread or None result; stable and machine readable.
type Reason string

const (
	// NoReadyEndpoints: no cluster has a ready endpoint, so no traffic can be served.
	NoReadyEndpoints Reason = "NoReadyEndpoints"
	// InsufficientNodeInfo: no cluster reported worker CPU (the zone allocator's reason).
	InsufficientNodeInfo Reason = "InsufficientNodeInfo"
	// InvalidInput: an empty or repeated name, a negative count, or zone sums that disagree.
	InvalidInput Reason = "InvalidInput"
	// InvalidOptions: thresholds that are not numbers within their range.
	InvalidOptions Reason = "InvalidOptions"
)

// Share is the part of some traffic that goes To a cluster (or a zone).
type Share struct {
	To    string
	Share float64
}

// ClusterAllocation is where one cluster's traffic goes.
type ClusterAllocation struct {
	Cluster string
	// Local is the share of the cluster's traffic its own endpoints serve.
	Local float64
	// Spill lists the other clusters that serve the rest, ascending by name, positive shares
	// only; Local plus the Spill shares is 1.
	Spill []Share
	// Load is the expected load of one of its endpoints relative to the fair share (1 = fair,
	// 1.25 = 25% over); 0 without endpoints.
	Load float64
	// Zones, when the input had zones, splits the traffic the cluster keeps by client zone.
	Zones []ZoneAllocation
	// Intake, when the input had zones and the cluster has endpoints, is how traffic other
	// clusters send here divides over its zones (shares of that traffic, ascending by zone).
	Intake []Share
}

// ZoneAllocation is where the traffic of one client zone goes. InZone plus the OtherZones
// shares is the cluster's Local share; the rest follows the cluster's Spill.
type ZoneAllocation struct {
	Zone string
	// InZone is the share of the zone's traffic served by endpoints in the same zone.
	InZone float64
	// OtherZones are the cluster's other zones that serve part of it, ascending, positive only.
	OtherZones []Share
	// Load is the expected load of one endpoint of this zone relative to the fair share.
	Load float64
}

// Result is the allocation of one Service.
type Result struct {
	Mode    Mode
	Reason  Reason // empty for Local and Spill
	Message string
	// Clusters holds one entry per input cluster, ascending by name; nil for None.
	Clusters []ClusterAllocation
	// MaxLoad is the largest expected endpoint load relative to the fair share.
	MaxLoad float64
	// Spilled is the share of the ClusterSet's traffic that leaves its cluster.
	Spilled float64
	// Changed is true when any cluster's Local or Spill differs from the previous allocation.
	Changed bool
}

// For returns the allocation of cluster, if it was part of the input.
func (r Result) For(cluster string) (ClusterAllocation, bool) {
	for _, c := range r.Clusters {
		if c.Cluster == cluster {
			return c, true
		}
	}
	return ClusterAllocation{}, false
}
