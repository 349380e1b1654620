package e2ebench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// triggerTimeAnnotation is the annotation both controllers stamp on the slices a sync writes: the
// time of the oldest Pod or Service change that sync took in.
const triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// Latencies are one side's network programming latencies as upstream defines them for the
// controller: from a slice's last-change-trigger-time to the write, seen through a watch started
// before the phase, one sample per write that carries a trigger time (as kube-proxy's SLI observes
// one per slice update it reads).
type Latencies []time.Duration

// Quantile returns the q-quantile (0..1) by the nearest rank, or 0 with no samples.
func (l Latencies) Quantile(q float64) time.Duration { return bench.Quantile(l, q) }

// latencySample is one latency with what it was measured on, for the log's slowest samples.
type latencySample struct {
	slice, managedBy string
	trigger, write   time.Time
	// repeat marks a write of a slice that already carried this trigger time: a later sync took
	// in further changes as old as the first, a write the first-write view leaves out.
	repeat bool
}

func (s latencySample) latency() time.Duration { return s.write.Sub(s.trigger) }

// samplesOf keeps the samples of the slices labelled managed-by managedBy.
func samplesOf(samples []latencySample, managedBy string) []latencySample {
	var out []latencySample
	for _, s := range samples {
		if s.managedBy == managedBy {
			out = append(out, s)
		}
	}
	return out
}

// slowest returns the n samples of the longest latency, longest first.
func slowest(samples []latencySample, n int) []latencySample {
	out := slices.Clone(samples)
	slices.SortFunc(out, func(a, b latencySample) int { return cmp.Compare(b.latency(), a.latency()) })
	return out[:min(n, len(out))]
}

// watchLatencies watches a Service's EndpointSlices from now on and records a latency for each
// write that carries a trigger time, except the one a slice already carried before the watch. A
// controller that writes a slice again with the same trigger time (a sync that took in further
// changes as old as the first) is measured on each write, as kube-proxy would observe each; such
// writes are marked repeat. The returned function stops the watch and returns the samples, each
// with the slice it was measured on. Pod trigger times have the API's whole-second resolution, so
// every sample carries up to a second of rounding, for both controllers alike.
func watchLatencies(ctx context.Context, cfg *rest.Config, ns, service string) (func() ([]latencySample, error), error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	sel := discoveryv1.LabelServiceName + "=" + service
	list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing slices before watching them: %w", err)
	}
	stamps := newTriggerStamps()
	for _, s := range list.Items {
		stamps.before[s.Name] = s.Annotations[triggerTimeAnnotation]
	}
	wctx, cancel := context.WithCancel(ctx)
	// A busy API server closes watches now and then; the retry watcher resumes from the last
	// resource version it saw, so no write is missed.
	w, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = sel
			return cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, opts)
		},
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching slices: %w", err)
	}
	var (
		mu      sync.Mutex
		samples []latencySample
		failure error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			at := time.Now()
			if ev.Type == watch.Error && wctx.Err() == nil {
				mu.Lock()
				failure = fmt.Errorf("slice watch: %v", ev.Object)
				mu.Unlock()
				return
			}
			s, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			stamp := s.Annotations[triggerTimeAnnotation]
			sample, repeat := stamps.observe(s.Name, stamp)
			if !sample {
				continue
			}
			trigger, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil {
				continue
			}
			mu.Lock()
			samples = append(samples, latencySample{slice: s.Name, managedBy: s.Labels[discoveryv1.LabelManagedBy],
				trigger: trigger, write: at, repeat: repeat})
			mu.Unlock()
		}
	}()
	return func() ([]latencySample, error) {
		cancel()
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return samples, failure
	}, nil
}

// triggerStamps follows the trigger time each slice carries through a watch, to tell which writes
// are latency samples.
type triggerStamps struct {
	// before is what each slice carried when the watch started, until it carries something else;
	// last is the latest trigger time written during the watch.
	before, last map[string]string
}

func newTriggerStamps() *triggerStamps {
	return &triggerStamps{before: map[string]string{}, last: map[string]string{}}
}

// observe takes a write of slice carrying stamp ("" for none) and reports whether it is a
// sample, and whether the slice already carried that trigger time from an earlier write in the
// watch. A write without a trigger time, or still carrying the one from before the watch, is no
// sample: it measures no change made while watching.
func (t *triggerStamps) observe(slice, stamp string) (sample, repeat bool) {
	if stamp == "" || t.before[slice] == stamp {
		return false, false
	}
	delete(t.before, slice)
	repeat = t.last[slice] == stamp
	t.last[slice] = stamp
	return true, repeat
}
