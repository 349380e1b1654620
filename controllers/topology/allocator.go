package topology

import (
	"errors"
)

// Allocate decides the hints for the ready endpoints of one Service (one address type).
//
// zones are the zones with ready worker Nodes (see ZonesFromNodes); endpoints are the ready
// endpoints only, each with the hint it carries today. Pass endpoints in a stable order (for
// example sorted by Key): when some hints must move, the earliest candidates move.
//
// Hints are on when there are at least MinEndpointsPerZone ready endpoints per zone, stay on
// down to OffEndpointsPerZone per zone when they were on before, and are off otherwise. While on,
// the current hints are kept as long as they meet the overload bound; unhinted endpoints get
// their own zone, and only when some zone would be overloaded are the fewest endpoints moved.
// When no assignment meets the bound, hints are off with MinAllocationExceedsOverloadThreshold.
func Allocate(zones []Zone, endpoints []Endpoint, opts Options) Result {
	var p Planner
	return AllocateWith(&p, zones, endpoints, opts)
}

// AllocateWith is Allocate reusing the buffers of p, for callers that decide many Services in a
// row (the simulator's dynamic mode, benchmarks).
func AllocateWith(p *Planner, zones []Zone, endpoints []Endpoint, opts Options) Result {
	t := opts.OverloadThreshold
	if err := ValidateOverloadThreshold(t); err != nil {
		return disabled(InvalidOptions, endpoints, "%v", err)
	}
	index, cpu, reason, msg := zoneIndex(zones)
	if reason != "" {
		return disabled(reason, endpoints, "%s", msg)
	}
	for _, ep := range endpoints {
		if ep.Zone == "" {
			return disabled(EndpointWithoutZone, endpoints, "endpoint %q has no zone", ep.Key)
		}
		if _, ok := index[ep.Zone]; !ok {
			return disabled(EndpointInZoneWithoutNodes, endpoints,
				"endpoint %q runs in zone %q, which has no ready Node with CPU", ep.Key, ep.Zone)
		}
	}
	n := len(cpu)
	ready := len(endpoints)
	if !opts.Allows(ready, n) {
		on, off := opts.band()
		if opts.EnabledBefore {
			return disabled(InsufficientNumberOfEndpoints, endpoints,
				"%d ready endpoints in %d zones, below the %d needed to keep hints", ready, n, off*n)
		}
		return disabled(InsufficientNumberOfEndpoints, endpoints,
			"%d ready endpoints in %d zones, below the %d needed to enable hints", ready, n, on*n)
	}

	hinted := make([]int, n*n)
	unhinted := make([]int, n)
	for _, ep := range endpoints {
		l := index[ep.Zone]
		if h, ok := index[ep.Hint]; ok {
			hinted[l*n+h]++
		} else {
			unhinted[l]++
		}
	}
	err := p.Plan(CountInput{MilliCPU: cpu, Hinted: hinted, Unhinted: unhinted, OverloadThreshold: t})
	if errors.Is(err, ErrInfeasible) {
		return disabled(MinAllocationExceedsOverloadThreshold, endpoints,
			"no hints keep %d endpoints in %d zones within %.0f%% of their fair share", ready, n, 100*t)
	}
	if err != nil {
		return disabled(InvalidOptions, endpoints, "%v", err)
	}
	return p.assign(index, endpoints)
}

// assign turns the plan's counts back into one hint per endpoint.
func (p *Planner) assign(index map[string]int, endpoints []Endpoint) Result {
	n := len(p.PerZone)
	names := make([]string, n)
	for name, i := range index {
		names[i] = name
	}
	free := p.FreeHints
	moves := p.Moves
	res := Result{Enabled: true, Hints: make([]string, len(endpoints))}
	for i, ep := range endpoints {
		l := index[ep.Zone]
		h, hinted := index[ep.Hint]
		switch {
		case hinted:
			for m := range moves {
				if moves[m].Count > 0 && moves[m].Zone == l && moves[m].From == h {
					moves[m].Count--
					h = moves[m].To
					break
				}
			}
		case free[l*n+l] > 0:
			// Unhinted endpoints serve their own zone first; the rest go where the plan sent them.
			free[l*n+l]--
			h = l
		default:
			for z := range n {
				if free[l*n+z] > 0 {
					free[l*n+z]--
					h = z
					break
				}
			}
		}
		res.Hints[i] = names[h]
		if res.Hints[i] != ep.Hint {
			res.Changed = true
			if hinted {
				res.Moved++
			}
		}
	}
	return res
}

// zoneIndex numbers the zones in input order, summing duplicates.
func zoneIndex(zones []Zone) (map[string]int, []int64, Reason, string) {
	index := make(map[string]int, len(zones))
	cpu := make([]int64, 0, len(zones))
	for _, z := range zones {
		if z.Name == "" || z.MilliCPU <= 0 {
			return nil, nil, InsufficientNodeInfo, "a zone without name or allocatable CPU"
		}
		if i, ok := index[z.Name]; ok {
			cpu[i] += z.MilliCPU
			continue
		}
		index[z.Name] = len(cpu)
		cpu = append(cpu, z.MilliCPU)
	}
	switch len(cpu) {
	case 0:
		return nil, nil, InsufficientNodeInfo, "no ready Node with a zone and allocatable CPU"
	case 1:
		return nil, nil, NodesReadyInOneZoneOnly, "ready Nodes in one zone only"
	}
	return index, cpu, "", ""
}

// Allows applies the hysteresis band: whether ready endpoints in zones are enough for hints,
// given whether hints were on before.
func (o Options) Allows(ready, zones int) bool {
	on, off := o.band()
	return ready >= on*zones || (o.EnabledBefore && ready >= off*zones)
}

// band returns the per-zone endpoint counts that switch hints on and keep them on.
func (o Options) band() (on, off int) {
	on, off = o.MinEndpointsPerZone, OffEndpointsPerZone
	if on < off {
		off = on
	}
	return on, off
}
