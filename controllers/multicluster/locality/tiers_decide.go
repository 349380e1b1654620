package locality

import "math"

// decide sets every unit's local share and split from the tiers, with hysteresis.
func (t *tiering) decide() {
	capT := t.capacities(t.a.opts.OverloadThreshold)
	fresh := t.fresh(capT)
	flows := fresh
	if kept := t.keepPrevious(fresh, capT); kept != nil {
		flows = kept
	}
	// A row that differs from its previous one only by rounding is the previous one: decided
	// along another float path (around other kept rows), it must not be rewritten for a last bit.
	for i := range t.a.units {
		u := &t.a.units[i]
		if prev := t.previousFlows(i); !u.kept && u.w > 0 && prev != nil && rowsEqual(prev, flows[i], u.w) {
			u.kept, flows[i] = true, prev
		}
	}
	load := make([]float64, t.n)
	for i := range flows {
		for d, f := range flows[i] {
			load[d] += f
		}
	}
	for i := range t.a.units {
		t.apply(i, flows[i], load, capT)
	}
}

func (t *tiering) capacities(threshold float64) []float64 {
	out := make([]float64, t.n)
	for d := range t.a.units {
		out[d] = (1 + threshold) * float64(t.a.units[d].in.Endpoints) * t.a.fair
	}
	return out
}

func (t *tiering) demand() []float64 {
	out := make([]float64, t.n)
	for i := range t.a.units {
		out[i] = t.a.units[i].w
	}
	return out
}

func matrix(n int) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = make([]float64, n)
	}
	return out
}

// fresh is the decision without history.
func (t *tiering) fresh(capacity []float64) [][]float64 {
	flows := matrix(t.n)
	t.fill(capacity, make([]float64, t.n), t.demand(), flows)
	return flows
}

// keepPrevious returns the flows with every keepable previous row kept and the other clients
// decided around them, or nil when no row is kept or the kept rows do not leave room for the
// others within the bound. Kept units are marked, so that their shares are copied verbatim.
func (t *tiering) keepPrevious(fresh [][]float64, capacity []float64) [][]float64 {
	var band [][]float64
	flows := matrix(t.n)
	load := make([]float64, t.n)
	residual := t.demand()
	anyKept := false
	for i := range t.a.units {
		prev := t.previousFlows(i)
		if prev == nil || t.a.units[i].w == 0 {
			continue
		}
		if !rowsEqual(prev, fresh[i], t.a.units[i].w) {
			if band == nil {
				band = t.fresh(t.capacities(t.a.opts.ReturnThreshold))
			}
			if !t.inBand(i, prev, fresh[i], band[i]) {
				continue
			}
		}
		copy(flows[i], prev)
		for d, f := range prev {
			load[d] += f
		}
		residual[i], anyKept = 0, true
		t.a.units[i].kept = true
	}
	if !anyKept {
		return nil
	}
	ok := t.fill(capacity, load, residual, flows)
	for d := range load {
		ok = ok && load[d] <= capacity[d]*(1+slack)+slack
	}
	// Kept rows take capacity first: no other client may be pushed out beyond its return band.
	for i := range t.a.units {
		if ok && !t.a.units[i].kept && t.a.units[i].w > 0 && !rowsEqual(flows[i], fresh[i], t.a.units[i].w) {
			if band == nil {
				band = t.fresh(t.capacities(t.a.opts.ReturnThreshold))
			}
			ok = t.keepsAtLeast(i, flows[i], band[i])
		}
	}
	if !ok {
		for i := range t.a.units {
			t.a.units[i].kept = false
		}
		return nil
	}
	return flows
}

// previousFlows reads client i's previous row as flows, or nil when it cannot be followed any
// more: a share that is not a number, a destination gone or without ready endpoints, or shares
// that do not add up to one.
func (t *tiering) previousFlows(i int) []float64 {
	u := &t.a.units[i]
	p := u.prev
	if p == nil || !validShare(p.Local) || (p.Local > 0 && u.in.Endpoints == 0) {
		return nil
	}
	out := make([]float64, t.n)
	out[i] = p.Local * u.w
	sum := p.Local
	for _, s := range p.Spill {
		d, ok := t.a.index(s.To)
		if !ok || d == i || !validShare(s.Share) || t.a.units[d].in.Endpoints == 0 {
			return nil
		}
		out[d] += s.Share * u.w
		sum += s.Share
	}
	if math.Abs(sum-1) > 1e-6 {
		return nil
	}
	return out
}

func validShare(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= 1+slack }

func rowsEqual(a, b []float64, w float64) bool {
	for d := range a {
		if math.Abs(a[d]-b[d]) > slack*math.Max(1, w) {
			return false
		}
	}
	return true
}

// inBand reports whether the previous row keeps, at every level of client i, no more than the
// fresh decision and no less than the decision at the return threshold: it spilled more than
// it must, but not so much more that taking it back would stay within the return band.
func (t *tiering) inBand(i int, prev, fresh, band []float64) bool {
	tol := slack * math.Max(1, t.a.units[i].w)
	for _, level := range t.levels[i] {
		var p, f, b float64
		for _, d := range level {
			p, f, b = p+prev[d], f+fresh[d], b+band[d]
		}
		if p > f+tol || p < b-tol {
			return false
		}
	}
	return true
}

// keepsAtLeast reports whether flows keep, at every level of client i, at least what band does.
func (t *tiering) keepsAtLeast(i int, flows, band []float64) bool {
	tol := slack * math.Max(1, t.a.units[i].w)
	for _, level := range t.levels[i] {
		var f, b float64
		for _, d := range level {
			f, b = f+flows[d], b+band[d]
		}
		if f < b-tol {
			return false
		}
	}
	return true
}

// apply turns client i's flows into its unit's local share and split; a client without demand
// gets the row its first bit of traffic would follow.
func (t *tiering) apply(i int, flows, load, capacity []float64) {
	u := &t.a.units[i]
	flows = clean(flows)
	var total float64
	for _, f := range flows {
		total += f
	}
	if !(total > 0) {
		flows = t.direction(i, load, capacity)
		total = 1
		u.kept = t.previousFollows(i, flows)
	}
	u.local = clamp01(flows[i] / total)
	if flows[i] == total {
		u.local = 1
	}
	if u.kept {
		// Shares are copied from the previous row (allocation.shares): the local share too.
		u.local = clamp01(u.prev.Local)
	}
	u.spill = (1 - u.local) * u.w
	u.split = make([]float64, t.n)
	var rest float64
	for d, f := range flows {
		if d != i {
			rest += f
		}
	}
	for d, f := range flows {
		if d != i && rest > 0 {
			u.split[d] = f / rest
		}
	}
}

// clean drops flows below rounding noise of the row's total: a water-fill at the bound leaves
// shares of 1e-17 that are no decision, only a last bit.
func clean(flows []float64) []float64 {
	var total float64
	for _, f := range flows {
		total += f
	}
	out := make([]float64, len(flows))
	for d, f := range flows {
		if f > slack*total {
			out[d] = f
		}
	}
	return out
}

// direction is where a client without demand sends traffic: home when its own cluster is its
// first level (as Allocate keeps such a cluster at home), else the first level with spare
// capacity, split by spare capacity, else the fallback by capacity.
func (t *tiering) direction(i int, load, capacity []float64) []float64 {
	out := make([]float64, t.n)
	if t.own[i] == 0 {
		out[i] = 1
		return out
	}
	levels := append(t.levels[i][:len(t.levels[i]):len(t.levels[i])], t.all)
	for k, set := range levels {
		var spare, total float64
		for _, d := range set {
			total += capacity[d]
			// Room below rounding noise is no room: the row must not flip on a last bit.
			if room := capacity[d] - load[d]; room > slack*math.Max(1, capacity[d]) {
				out[d] = room
				spare += room
			}
		}
		switch {
		case spare > 0:
			for _, d := range set {
				out[d] /= spare
			}
			return out
		case k == len(levels)-1 && total > 0:
			for _, d := range set {
				out[d] = capacity[d] / total
			}
			return out
		}
	}
	return out
}

// previousFollows reports whether a client without demand may keep its previous row: it goes
// only where direction would send its first bit (home, or the same level's clusters).
func (t *tiering) previousFollows(i int, direction []float64) bool {
	p := t.a.units[i].prev
	if p == nil || (p.Local > 0) != (direction[i] > 0) {
		return false
	}
	sum := p.Local
	for _, s := range p.Spill {
		d, ok := t.a.index(s.To)
		if !ok || d == i || !validShare(s.Share) || !(direction[d] > 0) {
			return false
		}
		sum += s.Share
	}
	return validShare(p.Local) && math.Abs(sum-1) <= 1e-6
}
