package locality

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// tolerance for comparing shares and loads computed along different float paths.
const tolerance = 1e-6

// totals returns a cluster's CPU and endpoints, summing its zones when it has them.
func totals(c Cluster) (int64, int) {
	if len(c.Zones) == 0 {
		return c.MilliCPU, c.Endpoints
	}
	var cpu int64
	n := 0
	for _, z := range c.Zones {
		cpu += z.MilliCPU
		n += z.Endpoints
	}
	return cpu, n
}

// need is the smallest share of c's traffic that must leave, computed from the closed form
// rather than through the allocator's code: what exceeds (1+t) fair shares per endpoint.
func need(c Cluster, cpu int64, endpoints int, t float64) float64 {
	w, n := totals(c)
	if n == 0 {
		return 1
	}
	if w == 0 {
		return 0
	}
	capacity := (1 + t) * float64(n) * float64(cpu) / float64(endpoints)
	return math.Max(0, 1-capacity/float64(w))
}

// checkResult holds a result to the package's promises, recomputing every load from the
// published shares alone: what an agent would do with them.
func checkResult(t *testing.T, clusters []Cluster, previous []ClusterAllocation, opts Options, res Result) {
	t.Helper()
	var cpu int64
	endpoints := 0
	byName := map[string]Cluster{}
	for _, c := range clusters {
		w, n := totals(c)
		cpu += w
		endpoints += n
		byName[c.Name] = c
	}
	switch {
	case endpoints == 0:
		if res.Mode != None || res.Reason != NoReadyEndpoints || res.Clusters != nil {
			t.Fatalf("no endpoints anywhere gave %+v", res)
		}
		return
	case cpu == 0:
		if res.Mode != Spread || res.Reason != InsufficientNodeInfo {
			t.Fatalf("no CPU anywhere gave %+v", res)
		}
	case res.Mode != Local && res.Mode != Spill:
		t.Fatalf("feasible input gave %s (%s: %s)", res.Mode, res.Reason, res.Message)
	}
	if len(res.Clusters) != len(clusters) {
		t.Fatalf("%d allocations for %d clusters", len(res.Clusters), len(clusters))
	}
	if !slices.IsSortedFunc(res.Clusters, func(a, b ClusterAllocation) int { return strings.Compare(a.Cluster, b.Cluster) }) {
		t.Fatalf("clusters not sorted: %+v", res.Clusters)
	}

	received := map[string]float64{}
	for _, a := range res.Clusters {
		c := byName[a.Cluster]
		w, n := totals(c)
		if a.Local < 0 || a.Local > 1 {
			t.Fatalf("%s keeps %v", a.Cluster, a.Local)
		}
		if n == 0 && a.Local != 0 {
			t.Fatalf("%s has no endpoints but keeps %v", a.Cluster, a.Local)
		}
		sum := a.Local
		for _, s := range a.Spill {
			to := byName[s.To]
			if _, tn := totals(to); tn == 0 || s.To == a.Cluster || !(s.Share > 0) {
				t.Fatalf("%s sends %v to %q (itself, unknown or without endpoints)", a.Cluster, s.Share, s.To)
			}
			sum += s.Share
			received[s.To] += float64(w) * s.Share
		}
		if math.Abs(sum-1) > tolerance {
			t.Fatalf("%s's shares add up to %v: %+v", a.Cluster, sum, a)
		}
		received[a.Cluster] += float64(w) * a.Local
	}
	fair := float64(cpu) / float64(endpoints)
	threshold := opts.OverloadThreshold
	if cpu == 0 {
		return
	}
	var spilled float64
	for _, a := range res.Clusters {
		c := byName[a.Cluster]
		w, n := totals(c)
		spilled += float64(w) * (1 - a.Local)
		if n == 0 {
			if received[a.Cluster] > 0 {
				t.Fatalf("%s has no endpoints but receives %v", a.Cluster, received[a.Cluster])
			}
			continue
		}
		load := received[a.Cluster] / (float64(n) * fair)
		if load > 1+threshold+tolerance {
			t.Fatalf("%s's endpoints expect %.6f of their fair share, bound %.2f", a.Cluster, load, 1+threshold)
		}
		if math.Abs(load-a.Load) > tolerance {
			t.Fatalf("%s reports load %v, the shares give %v", a.Cluster, a.Load, load)
		}
		minimal := need(c, cpu, endpoints, threshold)
		if 1-a.Local < minimal-tolerance {
			t.Fatalf("%s spills %v, less than the %v the bound needs", a.Cluster, 1-a.Local, minimal)
		}
		most := minimal
		if previous != nil {
			most = math.Max(minimal, need(c, cpu, endpoints, opts.ReturnThreshold))
		}
		if 1-a.Local > most+tolerance {
			t.Fatalf("%s spills %v; the bound needs %v and the return band allows %v", a.Cluster, 1-a.Local, minimal, most)
		}
		checkZones(t, c, a, received[a.Cluster]-float64(w)*a.Local, fair, threshold)
	}
	if math.Abs(spilled/float64(cpu)-res.Spilled) > tolerance {
		t.Fatalf("Spilled %v, the shares give %v", res.Spilled, spilled/float64(cpu))
	}
}

// checkZones recomputes the zone loads of one cluster from its zone shares and intake.
func checkZones(t *testing.T, c Cluster, a ClusterAllocation, intake, fair, threshold float64) {
	t.Helper()
	if len(c.Zones) == 0 {
		if a.Zones != nil || a.Intake != nil {
			t.Fatalf("%s has no zones but zone shares %+v", c.Name, a)
		}
		return
	}
	if len(a.Zones) != len(c.Zones) {
		t.Fatalf("%s: %d zone allocations for %d zones", c.Name, len(a.Zones), len(c.Zones))
	}
	zones := map[string]Zone{}
	for _, z := range c.Zones {
		zones[z.Name] = z
	}
	received := map[string]float64{}
	for _, za := range a.Zones {
		z := zones[za.Zone]
		sum := za.InZone
		received[za.Zone] += float64(z.MilliCPU) * za.InZone
		for _, s := range za.OtherZones {
			if zones[s.To].Endpoints == 0 || s.To == za.Zone || !(s.Share > 0) {
				t.Fatalf("%s/%s sends %v to zone %q", c.Name, za.Zone, s.Share, s.To)
			}
			sum += s.Share
			received[s.To] += float64(z.MilliCPU) * s.Share
		}
		if math.Abs(sum-a.Local) > tolerance {
			t.Fatalf("%s/%s keeps %v in the cluster, the cluster keeps %v", c.Name, za.Zone, sum, a.Local)
		}
		if z.Endpoints == 0 && za.InZone != 0 {
			t.Fatalf("%s/%s has no endpoints but keeps %v in zone", c.Name, za.Zone, za.InZone)
		}
	}
	var intakeSum float64
	for _, s := range a.Intake {
		intakeSum += s.Share
		received[s.To] += intake * s.Share
	}
	if intake > tolerance && math.Abs(intakeSum-1) > tolerance {
		t.Fatalf("%s receives %v but its intake shares add up to %v", c.Name, intake, intakeSum)
	}
	for _, z := range c.Zones {
		if z.Endpoints == 0 {
			if received[z.Name] > tolerance {
				t.Fatalf("%s/%s has no endpoints but receives %v", c.Name, z.Name, received[z.Name])
			}
			continue
		}
		if load := received[z.Name] / (float64(z.Endpoints) * fair); load > 1+threshold+tolerance {
			t.Fatalf("%s/%s's endpoints expect %.6f of their fair share, bound %.2f", c.Name, z.Name, load, 1+threshold)
		}
	}
}
