package agentbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/internal/lab/bench"
)

// The measurements of one size, in the order they run.
const (
	stepCold     = "cold sync"
	stepResync   = "periodic full resync"
	stepEndpoint = "one Service's endpoints change"
	stepAdd      = "one Service added"
	stepRemove   = "one Service removed"
	stepPercent  = "1% of Services change at once"
)

// settings are one run's sizes and repetitions, with the defaults already applied.
type settings struct {
	sizes      []int
	endpoints  int
	coldRuns   int
	resyncRuns int
	runs       int
	// budget stops repeating a measurement once one more run would take it past this time.
	budget time.Duration
}

// stepResult is one measurement at one size.
type stepResult struct {
	name    string
	samples []sample
	// changed and removed are what every run's Stats must say.
	changed, removed int
}

// sizeResult is everything measured at one size.
type sizeResult struct {
	services int
	steps    []stepResult
	// table is what the cold sync programmed.
	table tableCounts
	err   error
}

// checker gathers the invariants while the part measures.
type checker struct {
	syncs         int
	syncFailures  []string
	statsFailures []string
	tableChecks   []bench.Check
	// versusFailures are the side-by-side sizes that could not be measured to the end.
	versusFailures []string
}

func (c *checker) checks() []bench.Check {
	ok := bench.Check{Name: fmt.Sprintf("every sync succeeded and programmed every Service (%d syncs)", c.syncs)}
	if len(c.syncFailures) > 0 {
		ok.Failure = fmt.Sprintf("%d failed: %s", len(c.syncFailures), firstFew(c.syncFailures))
	}
	stats := bench.Check{Name: "every sync's Stats count the Services changed and removed that its step changed and removed"}
	if len(c.statsFailures) > 0 {
		stats.Failure = fmt.Sprintf("%d wrong: %s", len(c.statsFailures), firstFew(c.statsFailures))
	}
	return append([]bench.Check{ok, stats}, c.tableChecks...)
}

// compare records whether the programmed table equals a fresh render of services.
func (c *checker) compare(ctx context.Context, b backend, services []dataplane.Service, name string) error {
	check := bench.Check{Name: name}
	got, err := b.table(ctx)
	if err != nil {
		return fmt.Errorf("listing the table: %w", err)
	}
	want, err := freshRender(ctx, services)
	if err != nil {
		return fmt.Errorf("rendering %d Services: %w", len(services), err)
	}
	check.Failure = compareTables(got, want)
	c.tableChecks = append(c.tableChecks, check)
	return nil
}

// sizeRun measures one size on one backend.
type sizeRun struct {
	settings
	backend  backend
	check    *checker
	env      bench.Env
	syncer   *dataplane.Syncer
	services []dataplane.Service
	churn    churn
}

// runSize measures one size. A sync that fails ends the size early; what was measured until
// then is kept, and the failure goes to the checks. Other errors (listing the table, a
// cancelled context) end the whole part.
func runSize(ctx context.Context, s settings, b backend, check *checker, env bench.Env, n int) (sizeResult, error) {
	r := &sizeRun{settings: s, backend: b, check: check, env: env, services: buildServices(n, s.endpoints)}
	res := sizeResult{services: n}
	record := func(step stepResult, err error) bool {
		if len(step.samples) > 0 {
			res.steps = append(res.steps, step)
		}
		if err != nil {
			res.err = err
			check.syncFailures = append(check.syncFailures, fmt.Sprintf("%d Services, %s: %v", n, step.name, err))
		}
		return err == nil && ctx.Err() == nil
	}
	if !record(r.cold(ctx)) {
		return res, ctx.Err()
	}
	got, err := b.table(ctx)
	if err != nil {
		return res, fmt.Errorf("listing the table: %w", err)
	}
	res.table = got.counts()
	want, err := freshRender(ctx, r.services)
	if err != nil {
		return res, err
	}
	check.tableChecks = append(check.tableChecks, bench.Check{
		Name:    fmt.Sprintf("%s Services: the cold sync's table equals a fresh render of them", bench.Count(int64(n))),
		Failure: compareTables(got, want),
	})

	steps := []struct {
		name   string
		full   bool
		runs   int
		mutate func(round int) (changed, removed int)
	}{
		{stepResync, true, s.resyncRuns, func(int) (int, int) { return len(r.services), 0 }},
		{stepEndpoint, false, s.runs, r.changeEndpoints(1)},
		{stepAdd, false, s.runs, r.addService},
		{stepRemove, false, s.runs, r.removeService},
		{stepPercent, false, s.runs, r.changeEndpoints(max(n/100, 1))},
	}
	for _, st := range steps {
		if !record(r.repeat(ctx, st.name, st.full, st.runs, st.mutate)) {
			return res, ctx.Err()
		}
	}
	err = check.compare(ctx, b, r.services, fmt.Sprintf(
		"%s Services: after the incremental syncs the table equals a fresh render of the final Services",
		bench.Count(int64(n))))
	return res, err
}

// cold programs the table from nothing with a new Syncer each time, as an agent starting on a
// node without the table; the last Syncer stays for the incremental steps.
func (r *sizeRun) cold(ctx context.Context) (stepResult, error) {
	step := stepResult{name: stepCold, changed: len(r.services)}
	var spent time.Duration
	for run := range r.coldRuns {
		if run > 0 && spent+spent/time.Duration(run) > r.budget {
			break
		}
		s, err := r.backend.fresh(ctx)
		if err != nil {
			return step, err
		}
		r.syncer = s
		smp, err := r.syncOnce(ctx, &step, true)
		if err != nil {
			return step, err
		}
		spent += smp.wall
	}
	return step, nil
}

// repeat runs mutate-then-sync runs times, or fewer when the budget runs out.
func (r *sizeRun) repeat(ctx context.Context, name string, full bool, runs int, mutate func(int) (int, int)) (stepResult, error) {
	step := stepResult{name: name}
	var spent time.Duration
	for run := range runs {
		if run > 0 && spent+spent/time.Duration(run) > r.budget {
			break
		}
		step.changed, step.removed = mutate(run)
		smp, err := r.syncOnce(ctx, &step, full)
		if err != nil {
			return step, err
		}
		spent += smp.wall
	}
	return step, nil
}

func (r *sizeRun) syncOnce(ctx context.Context, step *stepResult, full bool) (sample, error) {
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}
	r.check.syncs++
	smp, st, err := r.backend.sync(ctx, r.syncer, r.services, full)
	if err != nil {
		return smp, err
	}
	step.samples = append(step.samples, smp)
	label := fmt.Sprintf("%s Services, %s, run %d", bench.Count(int64(len(r.services))), step.name, len(step.samples))
	if len(st.Rejected) > 0 {
		r.check.syncFailures = append(r.check.syncFailures, fmt.Sprintf("%s: %d Services rejected, first %s: %s",
			label, len(st.Rejected), st.Rejected[0].Service, st.Rejected[0].Reason))
	}
	if step.name == stepResync && (st.Operations != 0 || st.Rebuilt != "") {
		r.check.statsFailures = append(r.check.statsFailures, fmt.Sprintf("%s: the full resync of an unchanged table wrote %d operations (rebuilt: %q)",
			label, st.Operations, st.Rebuilt))
	}
	if st.Full != full || st.Changed != step.changed || st.Removed != step.removed || st.Services != len(r.services) {
		r.check.statsFailures = append(r.check.statsFailures, fmt.Sprintf(
			"%s: Full=%v Changed=%d Removed=%d Services=%d, want Full=%v Changed=%d Removed=%d Services=%d",
			label, st.Full, st.Changed, st.Removed, st.Services, full, step.changed, step.removed, len(r.services)))
	}
	r.env.Logf("agent %7s Services  %-32s %s  %d operations", bench.Count(int64(len(r.services))), step.name,
		smp.wall.Round(time.Microsecond), smp.operations)
	return smp, nil
}

// changeEndpoints replaces one endpoint in each of count Services spread over the set.
func (r *sizeRun) changeEndpoints(count int) func(round int) (int, int) {
	return func(round int) (int, int) {
		touched := map[int]bool{}
		for k := range count {
			i := spread(len(r.services), count, k, round)
			if touched[i] {
				continue
			}
			touched[i] = true
			r.services[i] = r.churn.replaceEndpoint(r.services[i], round)
		}
		return len(touched), 0
	}
}

func (r *sizeRun) addService(int) (int, int) {
	r.services = append(r.services, r.churn.newService(r.endpoints))
	return 1, 0
}

// removeService removes one Service, spread over the set; after the ones added just before, the
// set is back to its size.
func (r *sizeRun) removeService(round int) (int, int) {
	i := spread(len(r.services), 1, 0, round)
	r.services = slices.Delete(r.services, i, i+1)
	return 0, 1
}
