package locality

import "math"

// zones splits what cluster u keeps, and what other clusters send it, over its zones (step 5
// of Allocate). It is the cluster step one level down, with the same bound against the
// ClusterSet's fair share: a client zone keeps its kept traffic in zone up to what the zone's
// endpoints can carry, and the overflow plus the intake from other clusters fill the zones
// with the most spare capacity first. It always fits, because the cluster step left the
// cluster within its own capacity, which is the sum of its zones'.
//
// It is stateless: the cross-cluster shares, which failover moves, carry the hysteresis, and a
// zone's shares only change when its own CPU or endpoints do.
func (a *allocation) zones(u *unit) ([]ZoneAllocation, []Share) {
	zs := u.in.Zones
	t := a.opts.OverloadThreshold
	n := len(zs)
	keep := make([]float64, n)
	capacity := make([]float64, n)
	over := make([]float64, n)
	volume := u.intake
	for i, z := range zs {
		capacity[i] = (1 + t) * float64(z.Endpoints) * a.fair
		demand := float64(z.MilliCPU) * u.local
		keep[i] = demand
		if demand > capacity[i]*(1+slack) {
			keep[i] = capacity[i]
		}
		over[i] = demand - keep[i]
		volume += over[i]
	}
	q := split(keep, capacity, func(i int) bool { return zs[i].Endpoints > 0 }, volume, nil)

	out := make([]ZoneAllocation, n)
	for i, z := range zs {
		za := ZoneAllocation{Zone: z.Name}
		w := float64(z.MilliCPU)
		switch {
		case w > 0:
			za.InZone = keep[i] / w
		case z.Endpoints > 0:
			// No clients here: what it would send stays home, like a cluster without demand.
			za.InZone = u.local
		}
		for j, share := range q {
			var s float64
			switch {
			case w > 0:
				s = over[i] * share / w
			case z.Endpoints == 0:
				s = u.local * share
			}
			if s <= 0 {
				continue
			}
			if j == i {
				za.InZone += s // only by rounding: a zone at its bound is never filled
				continue
			}
			za.OtherZones = append(za.OtherZones, Share{To: zs[j].Name, Share: s})
		}
		if z.Endpoints > 0 {
			za.Load = (keep[i] + q[i]*volume) / (float64(z.Endpoints) * a.fair)
		}
		out[i] = za
	}
	var intake []Share
	if u.in.Endpoints > 0 {
		for i, share := range q {
			if share > 0 {
				intake = append(intake, Share{To: zs[i].Name, Share: math.Min(1, share)})
			}
		}
	}
	return out, intake
}
