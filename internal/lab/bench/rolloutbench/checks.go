package rolloutbench

import (
	"fmt"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

// The claims docs/benchmarks.md makes for the headline settings (both controllers at their
// defaults), checked on every full run.
const (
	// maxWriteRatio: fleetslice's mean rollout writes at most this share of upstream's.
	maxWriteRatio = 0.8
	// convergeSlack is two settle polls: both controllers follow the same rollout, and "converges
	// no later" means a mean convergence time at most this much above upstream's.
	convergeSlack = 500 * time.Millisecond
	// memoryCheckPods and maxManagerRSS: at this many Pods (the default memory size) the
	// manager's resident memory is at most half the 153 MiB it measured there before its caches
	// were trimmed (#40).
	memoryCheckPods = 10_000
	maxManagerRSS   = 76 << 20
)

func checks(env bench.Env, sz sizes, results []settingResult) []bench.Check {
	var out []bench.Check
	for _, res := range results {
		for _, s := range res.sides {
			out = append(out, sanityChecks(res.name, s)...)
		}
		limit := (sz.pods+99)/100 + 1
		c := bench.Check{Name: fmt.Sprintf("%s: fleetslice ends every rollout with at most ceil(Pods/100)+1 = %d slices", res.name, limit)}
		for i, p := range res.sides[0].Rollouts {
			if p.FinalSlices > limit {
				c.Failure = fmt.Sprintf("rollout %d ended with %d slices", i+1, p.FinalSlices)
			}
		}
		out = append(out, c)
		// At the quick size a rollout is a few dozen writes, too few for the comparison to
		// mean anything; the claims are held at the full size.
		if res.headline && !env.Quick {
			out = append(out, claims(res)...)
		}
		if res.mem != nil && sz.memoryPods >= memoryCheckPods {
			out = append(out, memoryCheck(sz, res.mem))
		}
	}
	return out
}

// memoryCheck holds the manager's resident memory at the memory size to its budget;
// kube-controller-manager's whole process is in the memory table beside it.
func memoryCheck(sz sizes, mem *memory) bench.Check {
	ours := mem.rows[0]
	c := bench.Check{Name: fmt.Sprintf("fleetslice's manager resident at %s Pods in at most %d MiB",
		bench.Count(int64(sz.memoryPods)), maxManagerRSS>>20)}
	if ours.atScale > maxManagerRSS {
		c.Failure = fmt.Sprintf("%s (kube-controller-manager with its EndpointSlice controller: %s)", mib(ours.atScale), mib(mem.rows[2].atScale))
	}
	return c
}

// sanityChecks hold at any size: every phase settled, its writes were counted, and its timeline
// never went down nor above the total.
func sanityChecks(setting string, s e2ebench.Side) []bench.Check {
	phases := append([]e2ebench.Phase{s.Setup}, s.Rollouts...)
	if s.ScaleUp != nil {
		phases = append(phases, *s.ScaleUp)
	}
	c := bench.Check{Name: fmt.Sprintf("%s: %s settled every phase with writes counted, a sane timeline and latencies", setting, s.Controller)}
	for i, p := range phases {
		if f := phaseFailure(p); f != "" {
			c.Failure = fmt.Sprintf("phase %d: %s", i, f)
			break
		}
	}
	return []bench.Check{c}
}

func phaseFailure(p e2ebench.Phase) string {
	all, last := e2ebench.TotalWrites(p.Writes), 0
	if all == 0 {
		return "no EndpointSlice writes counted"
	}
	for _, pt := range p.Timeline {
		if pt.Writes < last || pt.Writes > all {
			return fmt.Sprintf("timeline point %d at %s against %d writes in all", pt.Writes, pt.At, all)
		}
		last = pt.Writes
	}
	if len(p.Latency) == 0 {
		return "no write carried a last-change-trigger-time"
	}
	return ""
}

// claims are the headline promises: fewer writes, no later convergence, no higher p99 latency, and
// no more writes than upstream to create the Deployment (or to scale it up, where measured).
func claims(res settingResult) []bench.Check {
	ours, theirs := res.sides[0], res.sides[1]
	var out []bench.Check
	wo, wt := meanWrites(ours.Rollouts), meanWrites(theirs.Rollouts)
	c := bench.Check{Name: fmt.Sprintf("%s: fleetslice's mean rollout writes at most %.1f× kube-controller-manager's", res.name, maxWriteRatio)}
	if wo > maxWriteRatio*wt {
		c.Failure = fmt.Sprintf("%.0f against %.0f (%.2f×)", wo, wt, wo/wt)
	}
	out = append(out, c)

	co, ct := meanConverged(ours.Rollouts), meanConverged(theirs.Rollouts)
	c = bench.Check{Name: fmt.Sprintf("%s: fleetslice converges no later than kube-controller-manager (mean, within %s)", res.name, convergeSlack)}
	if co > ct+convergeSlack {
		c.Failure = fmt.Sprintf("%s against %s", co.Round(10*time.Millisecond), ct.Round(10*time.Millisecond))
	}
	out = append(out, c)

	po, pt := pooledLatency(ours.Rollouts).Quantile(0.99), pooledLatency(theirs.Rollouts).Quantile(0.99)
	c = bench.Check{Name: res.name + ": fleetslice's p99 network programming latency no higher than kube-controller-manager's"}
	if po > pt {
		c.Failure = fmt.Sprintf("%s against %s", po.Round(time.Millisecond), pt.Round(time.Millisecond))
	}
	out = append(out, c)

	so, st := e2ebench.TotalWrites(ours.Setup.Writes), e2ebench.TotalWrites(theirs.Setup.Writes)
	c = bench.Check{Name: res.name + ": creating the Deployment takes fleetslice no more writes than kube-controller-manager"}
	if so > st {
		c.Failure = fmt.Sprintf("%d against %d", so, st)
	}
	out = append(out, c)

	if ours.ScaleUp != nil && theirs.ScaleUp != nil {
		so, st = e2ebench.TotalWrites(ours.ScaleUp.Writes), e2ebench.TotalWrites(theirs.ScaleUp.Writes)
		c = bench.Check{Name: res.name + ": the scale-up takes fleetslice no more writes than kube-controller-manager"}
		if so > st {
			c.Failure = fmt.Sprintf("%d against %d", so, st)
		}
		out = append(out, c)
	}
	return out
}
