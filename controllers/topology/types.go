// Package topology decides per-endpoint zone hints for a Service.
//
// The allocator is pure: it reads zones (the allocatable CPU of their ready worker Nodes), the
// Service's ready endpoints with the hints they carry today, and returns the hints to write, or
// no hints together with a machine-readable reason and a human message. It never talks to the
// API server, so the controller, the tests and the simulator (package sim) all run the very same
// decision.
//
// Load model. A zone sends a share of the Service's traffic equal to its share of CPU, and
// kube-proxy splits a zone's traffic evenly among the endpoints hinted for that zone. With E
// ready endpoints the fair share of one endpoint is 1/E, so an endpoint hinted for zone z with
// n_z endpoints hinted there expects cpu_z/total/n_z. The bound the allocator guarantees is
//
//	cpu_z/total/n_z <= (1+threshold)/E   for every zone z,
//
// that is n_z >= ceil(cpu_z/total * E / (1+threshold)) endpoints for every zone. A zone that had
// no endpoint hinted for it would make kube-proxy ignore hints there; the bound never allows it,
// because every zone with CPU needs at least one endpoint.
package topology

import "fmt"

// Zone is one zone that can send traffic: the sum of the allocatable milli-CPU of its ready,
// non-control-plane Nodes.
type Zone struct {
	Name     string
	MilliCPU int64
}

// Endpoint is one ready endpoint of the Service. Key identifies it across calls (an address or
// a Pod UID; only the caller interprets it), Zone is where it runs and Hint the zone it is
// hinted for today ("" for none).
type Endpoint struct {
	Key  string
	Zone string
	Hint string
}

// Options tune the allocator.
type Options struct {
	// OverloadThreshold is the largest tolerated expected overload of one endpoint over its
	// fair share, as a fraction (0.25 means 25%).
	OverloadThreshold float64
	// MinEndpointsPerZone switches hints on once ready endpoints reach this many per zone.
	// Hints switch off only below OffEndpointsPerZone per zone, so in between the previous
	// state stays.
	MinEndpointsPerZone int
	// EnabledBefore says whether hints were on after the previous decision; it drives the
	// hysteresis band.
	EnabledBefore bool
}

// OffEndpointsPerZone is the per-zone count below which hints switch off even when they were
// on: the talk's lower padding (about 6 endpoints for 3 zones).
const OffEndpointsPerZone = 2

// DefaultOptions returns the flags' defaults: 25% overload, on at 3 endpoints per zone.
func DefaultOptions() Options {
	return Options{OverloadThreshold: 0.25, MinEndpointsPerZone: 3}
}

// MaxOverloadThreshold is the largest overload threshold accepted: beyond ten times an
// endpoint's fair share the bound no longer protects anything.
const MaxOverloadThreshold = 10

// Validate rejects options the allocator cannot honour.
func (o Options) Validate() error {
	if err := ValidateOverloadThreshold(o.OverloadThreshold); err != nil {
		return err
	}
	if o.MinEndpointsPerZone < OffEndpointsPerZone {
		return fmt.Errorf("--topology-min-endpoints-per-zone must be at least %d, got %d", OffEndpointsPerZone, o.MinEndpointsPerZone)
	}
	return nil
}

// ValidateOverloadThreshold is the one rule for the overload threshold, which bounds both zone
// hints and the allocation across clusters: a number within 0..MaxOverloadThreshold. 0 means
// what it says, no endpoint may expect more than its fair share.
func ValidateOverloadThreshold(t float64) error {
	if !(t >= 0 && t <= MaxOverloadThreshold) {
		return fmt.Errorf("--topology-overload-threshold must be within 0..%d, got %v", MaxOverloadThreshold, t)
	}
	return nil
}

// Reason says why hints are off. It is stable and machine readable; the names follow upstream's
// event messages where upstream has one.
type Reason string

const (
	// InsufficientNodeInfo: a ready worker Node lacks a zone label or allocatable CPU, or there
	// are no such Nodes at all.
	InsufficientNodeInfo Reason = "InsufficientNodeInfo"
	// NodesReadyInOneZoneOnly: fewer than two zones have ready worker Nodes.
	NodesReadyInOneZoneOnly Reason = "NodesReadyInOneZoneOnly"
	// InsufficientNumberOfEndpoints: too few ready endpoints for the hysteresis band.
	InsufficientNumberOfEndpoints Reason = "InsufficientNumberOfEndpoints"
	// EndpointWithoutZone: a ready endpoint has no zone.
	EndpointWithoutZone Reason = "EndpointWithoutZone"
	// EndpointInZoneWithoutNodes: a ready endpoint runs in a zone that has no ready worker
	// Node, so its zone's share of traffic is unknown.
	EndpointInZoneWithoutNodes Reason = "EndpointInZoneWithoutNodes"
	// MinAllocationExceedsOverloadThreshold: no assignment of hints keeps every endpoint
	// within the overload threshold.
	MinAllocationExceedsOverloadThreshold Reason = "MinAllocationExceedsOverloadThreshold"
	// InvalidOptions: the options cannot be used (negative or NaN threshold).
	InvalidOptions Reason = "InvalidOptions"
)

// Result is the allocator's decision.
type Result struct {
	// Enabled is true when Hints holds one zone per input endpoint.
	Enabled bool
	// Hints is aligned with the input endpoints: Hints[i] is the zone endpoint i is hinted for.
	// Nil when Enabled is false.
	Hints []string
	// Reason and Message explain why hints are off; empty when Enabled.
	Reason  Reason
	Message string
	// Moved counts endpoints whose hint named a known zone and now names another one (or, when
	// hints switch off, every endpoint that had a hint). Fixing a hint for a vanished zone is a
	// change but not a move.
	Moved int
	// Changed is true when any endpoint's hint differs from its input hint, so a write is due.
	Changed bool
}

func disabled(reason Reason, endpoints []Endpoint, format string, args ...any) Result {
	r := Result{Reason: reason, Message: fmt.Sprintf(format, args...)}
	for _, ep := range endpoints {
		if ep.Hint != "" {
			r.Moved++
			r.Changed = true
		}
	}
	return r
}
