package sim

import "math"

// Plan counts endpoints by the zone they run in (row) and the zone they are hinted for
// (column): Plan[l*Zones+h].
type Plan [Zones * Zones]int

// SliceCapacity is the published simulator's endpoints per EndpointSlice.
const SliceCapacity = 100

// Score weights of the published total.
const (
	inZoneWeight    = 0.45
	deviationWeight = 0.40
	sliceWeight     = 0.15
)

// Outcome is the theoretical traffic of one case under one algorithm.
type Outcome struct {
	// Invalid marks a case the algorithm answered inconsistently (a plan whose rows do not
	// match the endpoints); such cases are counted, not scored.
	Invalid bool
	// Hinted is true when the algorithm produced hints.
	Hinted bool
	// InZone is the share of traffic that stays in its zone.
	InZone float64
	// MaxDeviation is the largest |load/(1/E) - 1| over the endpoints, as the published
	// simulator computes it: under-loaded endpoints count as much as over-loaded ones.
	MaxDeviation float64
	// MeanDeviation is the mean of |load/(1/E) - 1| over the endpoints.
	MeanDeviation float64
	// MaxOverload is the largest positive load/(1/E) - 1: the quantity the threshold bounds.
	MaxOverload float64
	// Slices is how many EndpointSlices the algorithm's controller uses; GroupedSlices is how
	// many the published simulator would count if every hinted zone had slices of its own.
	Slices, GroupedSlices int
	// Endpoints is E.
	Endpoints int
}

// Evaluate computes the outcome of plan for case c, or of no hints when plan is nil, with the
// published traffic model: zone z sends Nodes[z]/sum(Nodes) of the traffic; with hints it is
// split evenly among the endpoints hinted for z. Like kube-proxy, a zone that no endpoint is
// hinted for spreads its traffic over all endpoints. Controllers that put hints inside their
// ordinary slices use ceil(E/100) slices whatever the hints; see GroupedSlices for the
// published per-zone slice groups.
func Evaluate(c Case, plan *Plan) Outcome {
	e := c.TotalEndpoints()
	nodes := c.Nodes[0] + c.Nodes[1] + c.Nodes[2]
	out := Outcome{Endpoints: e, Slices: ceilDiv(e, SliceCapacity)}
	if e == 0 || nodes == 0 {
		out.Invalid = true
		return out
	}
	fe, fn := float64(e), float64(nodes)
	if plan == nil {
		for z := range Zones {
			out.InZone += float64(c.Nodes[z]) / fn * float64(c.Endpoints[z]) / fe
		}
		out.GroupedSlices = out.Slices
		return out
	}
	out.Hinted = true
	var perZone [Zones]int
	for l := range Zones {
		row := 0
		for h := range Zones {
			row += plan[l*Zones+h]
			perZone[h] += plan[l*Zones+h]
		}
		if row != c.Endpoints[l] {
			out.Invalid = true
			return out
		}
	}
	spread := 0.0 // per-endpoint load from zones without hinted endpoints
	for z := range Zones {
		w := float64(c.Nodes[z]) / fn
		if perZone[z] == 0 {
			spread += w / fe
			out.InZone += w * float64(c.Endpoints[z]) / fe
			continue
		}
		out.InZone += w * float64(plan[z*Zones+z]) / float64(perZone[z])
		out.GroupedSlices += ceilDiv(perZone[z], SliceCapacity)
	}
	for z := range Zones {
		if perZone[z] == 0 {
			continue
		}
		load := float64(c.Nodes[z])/fn/float64(perZone[z]) + spread
		d := load*fe - 1
		out.MaxOverload = math.Max(out.MaxOverload, d)
		out.MaxDeviation = math.Max(out.MaxDeviation, math.Abs(d))
		out.MeanDeviation += math.Abs(d) * float64(perZone[z]) / fe
	}
	return out
}

// Scores are the published per-case scores, each out of 100.
type Scores struct {
	Total, InZone, Deviation, Slice float64
	// GroupedSlice and GroupedTotal use the published per-zone slice groups instead.
	GroupedSlice, GroupedTotal float64
}

// Score applies the published formulas: in-zone = 100*InZone; deviation = half of 100 minus the
// max deviation in percent plus half of 100 minus the mean deviation in percent; slice =
// 100*ceil(E/100)/slices; total = 0.45 in-zone + 0.40 deviation + 0.15 slice.
func (o Outcome) Score() Scores {
	s := Scores{InZone: o.InZone * 100}
	s.Deviation = 0.5*(100-o.MaxDeviation*100) + 0.5*(100-o.MeanDeviation*100)
	ideal := float64(ceilDiv(o.Endpoints, SliceCapacity))
	if o.Slices > 0 {
		s.Slice = ideal / float64(o.Slices) * 100
	}
	if o.GroupedSlices > 0 {
		s.GroupedSlice = ideal / float64(o.GroupedSlices) * 100
	}
	s.Total = inZoneWeight*s.InZone + deviationWeight*s.Deviation + sliceWeight*s.Slice
	s.GroupedTotal = inZoneWeight*s.InZone + deviationWeight*s.Deviation + sliceWeight*s.GroupedSlice
	return s
}

func ceilDiv(a, b int) int {
	return (a + b - 1) / b
}
