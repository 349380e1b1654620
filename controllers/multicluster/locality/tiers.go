package locality

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// AllocateTiers decides where each cluster's traffic goes when the Service's exports carry
// cluster selectors (KEP-5939): Cluster.Tiers are each client cluster's ordered selector results
// (package clusterselect). It is Allocate with more levels. A client's levels are, in order:
//
//   - its own cluster, placed just before the first tier that holds it (before the fallback
//     when none does): a client in its preferred tier keeps its traffic at home first;
//   - each tier, adding the clusters it selects to everything earlier levels offered;
//   - the fallback: every cluster with ready endpoints.
//
// Every level keeps what its clusters can carry within the bound (1+threshold) times the fair
// share, and only what it cannot carry moves on to the next level: the least spill level by
// level. Clients that share a level pour into it together, filling its clusters with the most
// spare capacity first (water-filling, as Allocate's receivers fill). Levels are taken in order
// of their position for every client, the fallback last for all, and at each position a
// cluster's own clients first, then the smaller sets, so a client that has only its own
// cluster or a small tier left is not crowded out of it by a client with wider choices. With Tiers nil for every cluster this is
// Allocate's fresh decision: each cluster keeps min(demand, capacity), the rest water-fills.
//
// Hysteresis, as Allocate's: a client's previous row is kept, bit for bit, while at every level
// it keeps between what the bound and the return threshold would let it keep (it spilled more
// than it must, but taking the surplus back would load its clusters above 1+ReturnThreshold),
// and all kept rows with the others decided around them still meet the bound. Otherwise the
// fresh decision stands. Zones inside clusters are split as in Allocate (step 5).
func AllocateTiers(clusters []Cluster, previous []ClusterAllocation, opts Options) Result {
	a, res, ok := prepare(clusters, previous, opts)
	if !ok {
		return res
	}
	t := newTiering(a)
	t.decide()
	return a.result(previous)
}

// prepare validates and sorts the input as Allocate does; ok false returns res as the answer.
func prepare(clusters []Cluster, previous []ClusterAllocation, opts Options) (*allocation, Result, bool) {
	if err := opts.Validate(); err != nil {
		return nil, Result{Mode: None, Reason: InvalidOptions, Message: err.Error(), Changed: len(previous) > 0}, false
	}
	units, msg := normalize(clusters)
	if msg != "" {
		return nil, Result{Mode: None, Reason: InvalidInput, Message: msg, Changed: len(previous) > 0}, false
	}
	var totalCPU int64
	totalEndpoints := 0
	for _, u := range units {
		totalCPU += u.in.MilliCPU
		totalEndpoints += u.in.Endpoints
	}
	if totalEndpoints == 0 {
		return nil, Result{Mode: None, Reason: NoReadyEndpoints, Changed: len(previous) > 0,
			Message: fmt.Sprintf("none of the %d clusters has a ready endpoint", len(units))}, false
	}
	if totalCPU == 0 {
		return nil, spread(units, totalEndpoints, previous), false
	}
	a := &allocation{units: units, opts: opts, cpu: totalCPU, endpoints: totalEndpoints,
		fair: float64(totalCPU) / float64(totalEndpoints)}
	a.attach(previous)
	return a, Result{}, true
}

// tiering holds every client's levels, as unit indexes.
type tiering struct {
	a *allocation
	// levels[i] are client i's cumulative destination sets before the fallback, each
	// ascending, each larger than the one before; own[i] is the position of its own cluster's
	// level, -1 without one.
	levels [][][]int
	own    []int
	all    []int // the fallback: every cluster with ready endpoints
	n      int
}

func newTiering(a *allocation) *tiering {
	t := &tiering{a: a, n: len(a.units), levels: make([][][]int, len(a.units)), own: make([]int, len(a.units))}
	for d := range a.units {
		if a.units[d].in.Endpoints > 0 {
			t.all = append(t.all, d)
		}
	}
	for i := range a.units {
		t.levels[i], t.own[i] = t.levelsOf(i)
	}
	return t
}

// levelsOf builds client i's levels from its tiers; names of clusters not in the input and
// clusters without endpoints are left out.
func (t *tiering) levelsOf(i int) ([][]int, int) {
	seen := make([]bool, t.n)
	var cum []int
	var out [][]int
	own := -1
	add := func(members []int) {
		grew := false
		for _, d := range members {
			if !seen[d] && t.a.units[d].in.Endpoints > 0 {
				seen[d], grew = true, true
				cum = append(cum, d)
			}
		}
		if grew {
			level := slices.Clone(cum)
			slices.Sort(level)
			out = append(out, level)
		}
	}
	addOwn := func() {
		if own < 0 && t.a.units[i].in.Endpoints > 0 {
			own = len(out)
			add([]int{i})
		}
	}
	for _, tier := range t.a.units[i].in.Tiers {
		var members []int
		for _, name := range tier {
			if d, ok := t.a.index(name); ok {
				members = append(members, d)
			}
		}
		if slices.Contains(members, i) {
			addOwn()
		}
		add(members)
	}
	addOwn()
	return out, own
}

// group is the clients that pour into one destination set at one level.
type group struct {
	set     []int
	clients []int
	key     string
	// own: the level is the clients' own cluster's. A cluster's own clients pour into it
	// before clients of other clusters whose level offers the same set.
	own bool
}

// groups returns the level-k groups of the clients with traffic left: own levels first, then
// smaller sets first.
func (t *tiering) groups(k int, residual []float64) []group {
	byKey := map[string]*group{}
	var out []*group
	for i := range t.n {
		if residual[i] <= 0 || k >= len(t.levels[i]) {
			continue
		}
		set, own := t.levels[i][k], k == t.own[i]
		key := setKey(set)
		if own {
			key = "own:" + key
		}
		g, ok := byKey[key]
		if !ok {
			g = &group{set: set, key: key, own: own}
			byKey[key] = g
			out = append(out, g)
		}
		g.clients = append(g.clients, i)
	}
	slices.SortFunc(out, func(x, y *group) int {
		if x.own != y.own {
			if x.own {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(len(x.set), len(y.set)); c != 0 {
			return c
		}
		return strings.Compare(x.key, y.key)
	})
	flat := make([]group, len(out))
	for i, g := range out {
		flat[i] = *g
	}
	return flat
}

func setKey(set []int) string {
	var b strings.Builder
	for _, d := range set {
		b.WriteString(strconv.Itoa(d))
		b.WriteByte(',')
	}
	return b.String()
}

// fill pours every client's residual traffic through its levels into capacity, on top of load,
// adding to flows (flows[i][d]: CPU units client i sends to cluster d). ok is false when the
// fallback could not take everything within capacity (only with kept rows, or by rounding).
func (t *tiering) fill(capacity, load, residual []float64, flows [][]float64) bool {
	depth := 0
	for _, l := range t.levels {
		depth = max(depth, len(l))
	}
	buf := make([]float64, t.n)
	for k := range depth {
		for _, g := range t.groups(k, residual) {
			t.pour(g.set, g.clients, capacity, load, residual, flows, false, buf)
		}
	}
	var rest []int
	for i := range t.n {
		if residual[i] > 0 {
			rest = append(rest, i)
		}
	}
	return len(rest) == 0 || t.pour(t.all, rest, capacity, load, residual, flows, true, buf)
}

// pour places the clients' residual traffic into set's spare capacity, most spare first; all
// of it when final, reporting whether it fitted.
func (t *tiering) pour(set, clients []int, capacity, load, residual []float64, flows [][]float64, final bool, buf []float64) bool {
	var volume, spare float64
	for _, c := range clients {
		volume += residual[c]
	}
	inSet := make([]bool, t.n)
	for _, d := range set {
		inSet[d] = true
		spare += math.Max(0, capacity[d]-load[d])
	}
	fits := volume <= spare+slack*math.Max(1, spare)
	placed := math.Min(volume, spare)
	if final {
		placed = volume
	}
	if !(placed > 0) {
		return fits
	}
	q := split(load, capacity, func(d int) bool { return inSet[d] }, placed, buf)
	for _, c := range clients {
		part := residual[c] * placed / volume
		for _, d := range set {
			flows[c][d] += part * q[d]
		}
		residual[c] -= part
		if placed == volume || residual[c] < slack*t.a.units[c].w {
			residual[c] = 0
		}
	}
	for _, d := range set {
		load[d] += placed * q[d]
	}
	return fits
}
