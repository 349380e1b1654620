package locality

// FirstReady is KEP-5939's default for consumers of cluster selector results: each client
// cluster uses the first of its tiers (Cluster.Tiers, in order) that holds a cluster with a
// ready endpoint, spread evenly over that tier's ready endpoints, and every cluster's ready
// endpoints when no tier has one. It looks at no capacity: a tier with one ready endpoint takes
// all of its clients' traffic. fleetslice offers it for users who want exactly the KEP's
// behaviour (--cluster-selection=first-ready); AllocateTiers is the bounded alternative.
//
// Zones are not split (the Service's own trafficDistribution applies inside the chosen
// clusters, as the KEP says, through the agents' usual selection), and there is no hysteresis:
// the rows follow the endpoints. Without CPU anywhere the result is Spread, as Allocate's.
func FirstReady(clusters []Cluster, previous []ClusterAllocation, opts Options) Result {
	a, res, ok := prepare(clusters, previous, opts)
	if !ok {
		return res
	}
	for i := range a.units {
		u := &a.units[i]
		u.in.Zones = nil
		row := a.firstReadyRow(i)
		u.local = row[i]
		u.spill = (1 - u.local) * u.w
		u.split = make([]float64, len(a.units))
		if rest := 1 - row[i]; rest > 0 {
			for d, s := range row {
				if d != i {
					u.split[d] = s / rest
				}
			}
		}
	}
	return a.result(previous)
}

// firstReadyRow is client i's share to each cluster: the ready endpoints of its first tier
// with any, or of the ClusterSet, evenly.
func (a *allocation) firstReadyRow(i int) []float64 {
	n := len(a.units)
	chosen := make([]bool, n)
	found := false
	for _, tier := range a.units[i].in.Tiers {
		for _, name := range tier {
			if d, ok := a.index(name); ok && a.units[d].in.Endpoints > 0 {
				chosen[d], found = true, true
			}
		}
		if found {
			break
		}
	}
	total := 0
	for d := range a.units {
		if !found {
			chosen[d] = a.units[d].in.Endpoints > 0
		}
		if chosen[d] {
			total += a.units[d].in.Endpoints
		}
	}
	row := make([]float64, n)
	for d := range a.units {
		if chosen[d] {
			row[d] = float64(a.units[d].in.Endpoints) / float64(total)
		}
	}
	return row
}
