package agentbench

import (
	"context"
	"fmt"
	"math"
	"time"
)

// await waits for the end of a sync, after both since and seen, after which the program's table
// holds every address in want, and returns when that sync ended by the program's own clock and
// the metrics read then. The table is listed only once the program has not synced for quietGap
// (longer than either program's least interval between syncs): listing a large table takes the
// nft program seconds of CPU, and a listing beside a sync would slow the very sync being measured
// (a Service added is two writes and two syncs, the second a second after the first). A sync
// that ended during the listing makes it look again.
func (r *running) await(ctx context.Context, since, seen time.Time, want []string, timeout time.Duration) (time.Time, scrape, error) {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		if time.Now().After(deadline) {
			return time.Time{}, nil, fmt.Errorf("%s: no sync programmed the change within %s (last error: %v); its log ends:\n%s",
				r.name, timeout, lastErr, r.logTail())
		}
		if err := ctx.Err(); err != nil {
			return time.Time{}, nil, err
		}
		s, err := r.scrape(ctx)
		if err != nil {
			select {
			case e := <-r.exited:
				r.exited <- e
				return time.Time{}, nil, err
			default:
			}
			// Not listening yet, right after the start.
			lastErr = err
			time.Sleep(pollEvery)
			continue
		}
		last := r.lastSync(s)
		if last.After(seen) && last.After(since) && time.Since(last) >= quietGap {
			listing, err := r.listTable()
			if err == nil && holdsAll(listing, want) {
				again, err := r.scrape(ctx)
				if err == nil && r.lastSync(again).Equal(last) {
					return last, s, nil
				}
				continue
			}
			lastErr = err
			seen = last
		}
		time.Sleep(pollEvery)
	}
}

// step measures one change: it waits until the last sync is quietGap old, writes the change,
// and waits for the table to hold it.
func (r *running) step(ctx context.Context, write func(now time.Time) ([]string, error)) (versusSample, error) {
	before, err := r.waitQuiet(ctx)
	if err != nil {
		return versusSample{}, err
	}
	start := time.Now()
	want, err := write(start)
	if err != nil {
		return versusSample{}, err
	}
	ended, after, err := r.await(ctx, start, r.lastSync(before), want, stepTimeout)
	if err != nil {
		return versusSample{}, err
	}
	return r.sampleOf(before, r.observed(ctx, before, after), ended.Sub(start), metricSync), nil
}

// observed returns a scrape that holds the sync's duration: kube-proxy sets its last-sync
// timestamp before it observes the sync's duration, so the scrape that saw the timestamp may not
// have it yet. It gives up after a second and returns the latest scrape (the figure is then n/a).
func (r *running) observed(ctx context.Context, before, after scrape) scrape {
	name := r.prefix + metricSync
	for deadline := time.Now().Add(time.Second); ; {
		if after.histogram(name).count > before.histogram(name).count || time.Now().After(deadline) {
			return after
		}
		time.Sleep(pollEvery)
		if s, err := r.scrape(ctx); err == nil {
			after = s
		}
	}
}

// waitQuiet returns the metrics once the last sync ended quietGap ago or more.
func (r *running) waitQuiet(ctx context.Context) (scrape, error) {
	for {
		s, err := r.scrape(ctx)
		if err != nil {
			return nil, err
		}
		idle := time.Since(r.lastSync(s))
		if idle >= quietGap {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(quietGap - idle):
		}
	}
}

// sampleOf reads what the program's metrics say happened between before and after; own comes
// from the histogram named (without the prefix).
func (r *running) sampleOf(before, after scrape, outside time.Duration, own string) versusSample {
	var smp versusSample
	smp.own, smp.syncs = after.histogram(r.prefix + own).since(before.histogram(r.prefix + own))
	_, smp.full = after.histogram(r.prefix + metricSyncFull).since(before.histogram(r.prefix + metricSyncFull))
	_, smp.partial = after.histogram(r.prefix + metricSyncPartial).since(before.histogram(r.prefix + metricSyncPartial))
	smp.programming, _ = after.histogram(r.prefix + metricProgramming).since(before.histogram(r.prefix + metricProgramming))
	smp.outside = outside
	return smp
}

// seconds prints a duration in seconds the way the part's tables do, "n/a" for NaN.
func seconds(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "n/a"
	}
	return duration(time.Duration(s * float64(time.Second)))
}
