package selection

import (
	"math"
	"testing"
)

// FuzzWeigh holds the agent-side derivation to its invariants over a small world of three
// clusters in two zones, with plans drawn from the bytes (including plans that name clusters
// without ready endpoints): every chosen endpoint is ready; shares are positive and sum to 1;
// a cluster the plan gives no share is chosen only on failover, and failover happens exactly
// when no cluster with a share has a ready endpoint; quantized weights keep every chosen
// endpoint and stay within the budget.
func FuzzWeigh(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6}, []byte{7, 1, 1, 1, 9, 3, 3, 6, 12})
	f.Add([]byte{0, 0, 0, 0}, []byte{0, 4, 8})
	f.Add([]byte{255, 1, 128, 7}, []byte{1, 5, 9, 13})
	f.Fuzz(func(t *testing.T, planBytes, epBytes []byte) {
		clusters := []string{"a", "b", "c"}
		zones := []string{"z1", "z2"}
		var eps []Endpoint
		for i := 0; i < len(epBytes) && len(eps) < 48; i++ {
			b := epBytes[i]
			eps = append(eps, Endpoint{Cluster: clusters[int(b>>1)%3], Zone: zones[int(b>>3)%2], Ready: b&1 != 0})
		}
		byte01 := func(i int) float64 {
			if i < len(planBytes) {
				return float64(planBytes[i]) / 255
			}
			return 0
		}
		// Local and spill shares proportional to three bytes, normalised to 1.
		raw := []float64{byte01(0), byte01(1), byte01(2)}
		sum := raw[0] + raw[1] + raw[2]
		if sum == 0 {
			raw[0], sum = 1, 1
		}
		plan := ClusterPlan{Local: raw[0] / sum}
		for i, c := range clusters[1:] {
			if s := raw[i+1] / sum; s > 0 {
				plan.Spill = append(plan.Spill, Share{To: c, Share: s})
			}
		}
		if byte01(3) > 0.5 {
			in := plan.Local * byte01(4)
			plan.Zones = []ZoneShare{{Zone: "z1", InZone: in, OtherZones: []Share{{To: "z2", Share: plan.Local - in}}}}
		}
		if byte01(5) > 0.5 {
			plan.Intake = map[string][]Share{"b": {{To: "z1", Share: byte01(6)}, {To: "z2", Share: 1 - byte01(6)}}}
		}
		node := Node{Name: "n", Zone: zones[int(byte01(7)*255)%2], Cluster: "a"}
		share := map[string]float64{"a": plan.Local}
		for _, s := range plan.Spill {
			share[s.To] += s.Share
		}

		out, failover := Weigh(eps, plan, node)
		anyReady, planReady := false, false
		for _, e := range eps {
			anyReady = anyReady || e.Ready
			planReady = planReady || (e.Ready && share[e.Cluster] > 0)
		}
		if !anyReady {
			if out != nil {
				t.Fatalf("nothing ready but chose %v", out)
			}
			return
		}
		if failover != !planReady {
			t.Fatalf("failover %v, but a cluster with a share has ready endpoints: %v", failover, planReady)
		}
		total := 0.0
		shares := make([]float64, len(out))
		for i, w := range out {
			if !w.Endpoint.Ready {
				t.Fatalf("chose a not-ready endpoint %+v", w.Endpoint)
			}
			if !(w.Share > 0) || math.IsInf(w.Share, 0) {
				t.Fatalf("share %v", w.Share)
			}
			if share[w.Endpoint.Cluster] == 0 && !failover {
				t.Fatalf("chose cluster %q, which has no share in %+v", w.Endpoint.Cluster, plan)
			}
			total += w.Share
			shares[i] = w.Share
		}
		if math.Abs(total-1) > 1e-9 {
			t.Fatalf("shares sum to %v", total)
		}
		weights := Quantize(shares, DefaultWeightBudget)
		sumW := 0
		for _, w := range weights {
			if w == 0 {
				t.Fatalf("a chosen endpoint lost its weight: %v from %v", weights, shares)
			}
			sumW += int(w)
		}
		if sumW > DefaultWeightBudget+len(weights) {
			t.Fatalf("weights %d above the budget", sumW)
		}
	})
}
