package locality

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/fleetslice/fleetslice/controllers/topology"
)

// slack absorbs float rounding when a share read back from a previous allocation is compared
// with the capacity it must fit: without it a split that fitted exactly would be re-decided
// every time for a last-bit difference.
const slack = 1e-9

// unit is one cluster during the allocation, in CPU units (milli-CPU as float64).
type unit struct {
	in       Cluster
	w        float64
	capacity float64
	local    float64 // share of its traffic kept
	spill    float64 // traffic leaving it
	intake   float64 // traffic other clusters send to it
	prev     *ClusterAllocation
	kept     bool      // its previous split is kept (lazy destinations)
	split    []float64 // where its spill goes, aligned with the units
}

// Allocate decides where each cluster's traffic goes for one Service.
//
// clusters are the members that export or import the Service, each with the CPU of its ready
// worker Nodes and the Service's ready endpoints there (optionally by zone); previous is the
// allocation published last time (nil the first time), read back for the hysteresis. The
// decision, in order:
//
//  1. A cluster without ready endpoints sends everything elsewhere (failover).
//  2. A cluster keeps all of its traffic while its endpoints stay within the bound; otherwise
//     it keeps exactly what they can carry at the bound and spills the rest, the smallest
//     spill that meets it.
//  3. Hysteresis: a cluster that spilled more than step 2 needs keeps its previous share as
//     long as taking the surplus back would load it above (1+ReturnThreshold) times the fair
//     share; then it returns to step 2 at once. Zone hints keep their previous hints the same
//     way: nothing moves that the bound does not force.
//  4. Spill goes to the clusters that keep all of their traffic, most spare capacity first
//     (see split). A spiller's previous destinations are kept while they still fit.
//  5. With zones, what a cluster keeps stays in its client's zone up to the zone's own bound,
//     and the rest, with what other clusters send, fills the cluster's zones the same way.
//
// With no ready endpoint anywhere the result is None (NoReadyEndpoints): nothing to route to.
// When no cluster reports CPU the result is Spread (InsufficientNodeInfo): every cluster
// spreads over all endpoints, which also meets the bound. Results are deterministic and do not
// depend on the order of clusters or previous.
func Allocate(clusters []Cluster, previous []ClusterAllocation, opts Options) Result {
	if err := opts.Validate(); err != nil {
		return Result{Mode: None, Reason: InvalidOptions, Message: err.Error(), Changed: len(previous) > 0}
	}
	units, msg := normalize(clusters)
	if msg != "" {
		return Result{Mode: None, Reason: InvalidInput, Message: msg, Changed: len(previous) > 0}
	}
	var totalCPU int64
	totalEndpoints := 0
	for _, u := range units {
		totalCPU += u.in.MilliCPU
		totalEndpoints += u.in.Endpoints
	}
	if totalEndpoints == 0 {
		return Result{Mode: None, Reason: NoReadyEndpoints, Changed: len(previous) > 0,
			Message: fmt.Sprintf("none of the %d clusters has a ready endpoint", len(units))}
	}
	if totalCPU == 0 {
		return spread(units, totalEndpoints, previous)
	}

	a := allocation{units: units, opts: opts, cpu: totalCPU, endpoints: totalEndpoints,
		fair: float64(totalCPU) / float64(totalEndpoints)}
	a.attach(previous)
	a.decide(true)
	if !a.hasReceiver() {
		// Unreachable with exact arithmetic (the caps add up to more than the demand); if
		// rounding ever gets there, the fresh decision always leaves a receiver.
		a.decide(false)
	}
	a.destinations()
	return a.result(previous)
}

type allocation struct {
	units     []unit
	opts      Options
	cpu       int64
	endpoints int
	fair      float64 // demand per endpoint at the fair share, in CPU units
}

// Validate rejects options the allocation cannot honour: the overload threshold by the zone
// hints' rule, the one both levels share.
func (o Options) Validate() error {
	if err := topology.ValidateOverloadThreshold(o.OverloadThreshold); err != nil {
		return err
	}
	if r := o.ReturnThreshold; !(r >= 0 && r <= o.OverloadThreshold) {
		return fmt.Errorf("return threshold %v is not between 0 and the overload threshold %v", r, o.OverloadThreshold)
	}
	return nil
}

// normalize validates the clusters and sorts them (and their zones) by name, so that every
// float sum below runs in one order whatever the caller's.
func normalize(clusters []Cluster) ([]unit, string) {
	units := make([]unit, len(clusters))
	for i, c := range clusters {
		if c.Name == "" || c.MilliCPU < 0 || c.Endpoints < 0 {
			return nil, fmt.Sprintf("cluster %q has no name or a negative count", c.Name)
		}
		if len(c.Zones) > 0 {
			c.Zones = slices.Clone(c.Zones)
			slices.SortFunc(c.Zones, func(a, b Zone) int { return cmp.Compare(a.Name, b.Name) })
			var cpu int64
			endpoints := 0
			for j, z := range c.Zones {
				if z.Name == "" || z.MilliCPU < 0 || z.Endpoints < 0 || (j > 0 && c.Zones[j-1].Name == z.Name) {
					return nil, fmt.Sprintf("cluster %q has a zone without name, repeated or with a negative count", c.Name)
				}
				cpu += z.MilliCPU
				endpoints += z.Endpoints
			}
			if (c.MilliCPU != 0 && c.MilliCPU != cpu) || (c.Endpoints != 0 && c.Endpoints != endpoints) {
				return nil, fmt.Sprintf("cluster %q: %d milli-CPU and %d endpoints disagree with its zones' %d and %d",
					c.Name, c.MilliCPU, c.Endpoints, cpu, endpoints)
			}
			c.MilliCPU, c.Endpoints = cpu, endpoints
		}
		units[i] = unit{in: c, w: float64(c.MilliCPU)}
	}
	slices.SortFunc(units, func(a, b unit) int { return cmp.Compare(a.in.Name, b.in.Name) })
	for i := 1; i < len(units); i++ {
		if units[i].in.Name == units[i-1].in.Name {
			return nil, fmt.Sprintf("cluster %q is listed twice", units[i].in.Name)
		}
	}
	return units, ""
}

func (a *allocation) attach(previous []ClusterAllocation) {
	for i := range previous {
		p := &previous[i]
		if j, ok := a.index(p.Cluster); ok && a.units[j].prev == nil {
			a.units[j].prev = p
		}
	}
}

func (a *allocation) index(name string) (int, bool) {
	return slices.BinarySearchFunc(a.units, name, func(u unit, n string) int { return cmp.Compare(u.in.Name, n) })
}

// decide sets every cluster's local share (steps 1 to 3); hysteresis false ignores previous.
func (a *allocation) decide(hysteresis bool) {
	t, r := a.opts.OverloadThreshold, a.opts.ReturnThreshold
	for i := range a.units {
		u := &a.units[i]
		u.capacity = (1 + t) * float64(u.in.Endpoints) * a.fair
		need := a.minimalSpill(u, t)
		u.local = 1 - need
		if hysteresis && u.prev != nil {
			was := 1 - clamp01(u.prev.Local)
			if was > need && was <= a.minimalSpill(u, r) {
				u.local = clamp01(u.prev.Local)
			}
		}
		u.spill = (1 - u.local) * u.w
	}
}

// minimalSpill is the smallest share of u's traffic that must leave for its endpoints to stay
// within (1+threshold) times the fair share: zero when the zone allocator's minimum count of
// endpoints for that demand is met, all of it without endpoints.
func (a *allocation) minimalSpill(u *unit, threshold float64) float64 {
	n := u.in.Endpoints
	switch {
	case n == 0:
		return 1
	case n >= topology.MinimumHinted(u.in.MilliCPU, a.cpu, a.endpoints, threshold):
		return 0
	}
	carry := (1 + threshold) * float64(n) * a.fair
	return clamp01(1 - carry/u.w)
}

func (a *allocation) receives(i int) bool {
	return a.units[i].local == 1 && a.units[i].in.Endpoints > 0
}

func (a *allocation) hasReceiver() bool {
	for i := range a.units {
		if a.receives(i) {
			return true
		}
	}
	return false
}

// destinations decides where each spiller's traffic goes (step 4): previous splits are kept
// when, all together, they still fit the receivers' spare capacity; the other spillers share
// one water-filled split of what is left.
func (a *allocation) destinations() {
	n := len(a.units)
	keep := make([]float64, n)
	capacity := make([]float64, n)
	for i := range a.units {
		keep[i] = a.units[i].w * a.units[i].local
		capacity[i] = a.units[i].capacity
	}
	intake := make([]float64, n)
	anyKept := false
	for i := range a.units {
		u := &a.units[i]
		if u.local == 1 {
			continue
		}
		if s := a.previousSplit(u); s != nil {
			u.kept, u.split, anyKept = true, s, true
			for d, q := range s {
				intake[d] += u.spill * q
			}
		}
	}
	if anyKept {
		for d := range a.units {
			if intake[d] > math.Max(0, capacity[d]-keep[d])+slack*capacity[d] {
				for i := range a.units {
					a.units[i].kept, a.units[i].split = false, nil
				}
				clear(intake)
				break
			}
		}
	}
	volume := 0.0
	for i := range a.units {
		if u := &a.units[i]; u.local < 1 && !u.kept {
			volume += u.spill
		}
	}
	for d := range keep {
		keep[d] += intake[d]
	}
	shared := split(keep, capacity, a.receives, volume, nil)
	for i := range a.units {
		u := &a.units[i]
		if u.local < 1 && !u.kept {
			u.split = shared
		}
	}
}

// previousSplit returns how u's previous spill divided over the clusters, when every cluster
// it went to still takes spill; nil otherwise.
func (a *allocation) previousSplit(u *unit) []float64 {
	if u.prev == nil || len(u.prev.Spill) == 0 {
		return nil
	}
	s := make([]float64, len(a.units))
	var sum float64
	for _, sh := range u.prev.Spill {
		d, ok := a.index(sh.To)
		if !ok || !a.receives(d) || !(sh.Share > 0) || math.IsInf(sh.Share, 0) {
			return nil
		}
		s[d] += sh.Share
		sum += sh.Share
	}
	for d := range s {
		s[d] /= sum
	}
	return s
}

// result turns the units into the published allocation. Loads and zone intakes are derived
// from the published shares, not from the working values, so that they are exactly what agents
// following the shares produce, and a result fed back reproduces them to the last bit.
func (a *allocation) result(previous []ClusterAllocation) Result {
	res := Result{Mode: Local, Clusters: make([]ClusterAllocation, len(a.units))}
	var spilled float64
	for i := range a.units {
		u := &a.units[i]
		u.intake = 0
		res.Clusters[i] = ClusterAllocation{Cluster: u.in.Name, Local: u.local}
		if u.local < 1 {
			res.Mode = Spill
			spilled += u.spill
			res.Clusters[i].Spill = a.shares(u)
		}
	}
	for i := range a.units {
		for _, s := range res.Clusters[i].Spill {
			if d, ok := a.index(s.To); ok {
				a.units[d].intake += a.units[i].w * s.Share
			}
		}
	}
	for i := range a.units {
		u, c := &a.units[i], &res.Clusters[i]
		if n := u.in.Endpoints; n > 0 {
			c.Load = (u.w*u.local + u.intake) / (float64(n) * a.fair)
			res.MaxLoad = math.Max(res.MaxLoad, c.Load)
		}
		if len(u.in.Zones) > 0 {
			c.Zones, c.Intake = a.zones(u)
			for _, z := range c.Zones {
				res.MaxLoad = math.Max(res.MaxLoad, z.Load)
			}
		}
	}
	res.Spilled = spilled / float64(a.cpu)
	res.Changed = changed(res.Clusters, previous)
	return res
}

// shares lists u's spill by destination. A kept split whose local share did not change is
// copied from the previous allocation verbatim, so feeding a result back changes nothing.
func (a *allocation) shares(u *unit) []Share {
	if u.kept && u.local == u.prev.Local {
		out := slices.Clone(u.prev.Spill)
		slices.SortFunc(out, func(x, y Share) int { return cmp.Compare(x.To, y.To) })
		return out
	}
	var out []Share
	for d, q := range u.split {
		if q > 0 {
			out = append(out, Share{To: a.units[d].in.Name, Share: (1 - u.local) * q})
		}
	}
	return out
}

// spread is the allocation without demand: every cluster sends each cluster its share of the
// ClusterSet's ready endpoints, so every endpoint carries exactly its fair share.
func spread(units []unit, endpoints int, previous []ClusterAllocation) Result {
	res := Result{Mode: Spread, Reason: InsufficientNodeInfo, MaxLoad: 1, Clusters: make([]ClusterAllocation, len(units)),
		Message: "no cluster reports worker CPU, so traffic spreads over every ready endpoint of the ClusterSet"}
	for i, u := range units {
		c := ClusterAllocation{Cluster: u.in.Name, Local: float64(u.in.Endpoints) / float64(endpoints)}
		if u.in.Endpoints > 0 {
			c.Load = 1
		}
		for _, d := range units {
			if d.in.Name != u.in.Name && d.in.Endpoints > 0 {
				c.Spill = append(c.Spill, Share{To: d.in.Name, Share: float64(d.in.Endpoints) / float64(endpoints)})
			}
		}
		res.Clusters[i] = c
	}
	res.Changed = changed(res.Clusters, previous)
	return res
}

// changed reports whether the clusters' shares differ from previous, which then needs writing.
func changed(clusters []ClusterAllocation, previous []ClusterAllocation) bool {
	if len(clusters) != len(previous) {
		return true
	}
	byName := make(map[string]*ClusterAllocation, len(previous))
	for i := range previous {
		byName[previous[i].Cluster] = &previous[i]
	}
	for _, c := range clusters {
		p, ok := byName[c.Cluster]
		if !ok || p.Local != c.Local || !slices.Equal(p.Spill, c.Spill) {
			return true
		}
	}
	return false
}
