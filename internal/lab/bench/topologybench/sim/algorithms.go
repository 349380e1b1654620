package sim

import (
	"fmt"

	"github.com/fleetslice/fleetslice/controllers/topology"
)

// Algorithm names accepted by NewAlgorithm.
const (
	Original   = "original"
	Upstream   = "upstream"
	Fleetslice = "fleetslice"
)

// UpstreamThreshold is the overload threshold compiled into k8s.io/endpointslice's topologycache.
const UpstreamThreshold = 0.2

// Algorithm decides hints for one case at a time. Implementations keep scratch state, so each
// worker needs its own.
type Algorithm interface {
	// Plan fills plan for c and reports whether the case gets hints at all.
	Plan(c Case, plan *Plan) bool
}

// Settings choose the algorithm and its knobs.
type Settings struct {
	Algorithm           string
	Threshold           float64 // fleetslice only
	MinEndpointsPerZone int     // fleetslice only; 0 means the default
}

// NewAlgorithm returns a fresh instance of the named algorithm.
func NewAlgorithm(s Settings) (Algorithm, error) {
	switch s.Algorithm {
	case Original:
		return original{}, nil
	case Fleetslice:
		if s.Threshold < 0 {
			return nil, fmt.Errorf("threshold %v must not be negative", s.Threshold)
		}
		opts := topology.DefaultOptions()
		opts.OverloadThreshold = s.Threshold
		if s.MinEndpointsPerZone > 0 {
			opts.MinEndpointsPerZone = s.MinEndpointsPerZone
		}
		return &fleetslice{opts: opts}, nil
	case Upstream:
		return newUpstream(), nil
	}
	return nil, fmt.Errorf("unknown algorithm %q (want %s, %s or %s)", s.Algorithm, Original, Upstream, Fleetslice)
}

// original is kube-proxy without hints: every zone spreads over every endpoint.
type original struct{}

func (original) Plan(Case, *Plan) bool { return false }

// fleetslice runs the allocator's counting core, the same code Allocate runs, for a Service
// seen for the first time (no current hints, hints not on before).
type fleetslice struct {
	opts     topology.Options
	planner  topology.Planner
	cpu      [Zones]int64
	unhinted [Zones]int
}

func (f *fleetslice) Plan(c Case, plan *Plan) bool {
	if !f.opts.Allows(c.TotalEndpoints(), Zones) {
		return false
	}
	for z := range Zones {
		// Every simulated Node has the same CPU, so a zone's share of CPU is its share of Nodes.
		f.cpu[z] = int64(c.Nodes[z]) * 1000
		f.unhinted[z] = c.Endpoints[z]
	}
	err := f.planner.Plan(topology.CountInput{
		MilliCPU: f.cpu[:], Unhinted: f.unhinted[:], OverloadThreshold: f.opts.OverloadThreshold,
	})
	if err != nil {
		return false
	}
	copy(plan[:], f.planner.Final)
	return true
}
