package e2ebench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// TraceDirEnv names a directory into which each phase's Pod events are written, one JSON line
// per event, when set. The in-process bench replays such a trace (slicediff's trace scenario), so
// a coalescing or placement decision can be tried against the event timing of a real cluster in
// seconds instead of a run of this bench.
const TraceDirEnv = "FLEETSLICE_E2E_TRACE_DIR"

// PodEvent is one Pod change of a trace: what an informer on the cluster delivered, and when.
type PodEvent struct {
	// At is the time since the phase began.
	At    time.Duration `json:"at"`
	Type  string        `json:"type"`
	Name  string        `json:"name"`
	IP    string        `json:"ip,omitempty"`
	Node  string        `json:"node,omitempty"`
	Ready bool          `json:"ready,omitempty"`
	// ReadySince is the Ready condition's lastTransitionTime, Created the Pod's creation and
	// Deleted its deletion timestamp, each since the phase began (whole seconds, as the API has
	// them).
	ReadySince time.Duration  `json:"readySince,omitempty"`
	Created    time.Duration  `json:"created,omitempty"`
	Deleted    *time.Duration `json:"deleted,omitempty"`
	Phase      string         `json:"phase,omitempty"`
}

// traceFiles numbers the trace files of one process.
var traceFiles struct {
	sync.Mutex
	n int
}

// tracePods, when TraceDirEnv is set, records the namespace's Pod events from now on into a new
// file named after the side and phase; the returned function stops it. Without the variable it
// does nothing.
func tracePods(ctx context.Context, cfg *rest.Config, ns, side, what string, start time.Time) (func() error, error) {
	dir := os.Getenv(TraceDirEnv)
	if dir == "" {
		return func() error { return nil }, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	traceFiles.Lock()
	traceFiles.n++
	name := fmt.Sprintf("%02d-%s-%s.jsonl", traceFiles.n, side, what)
	traceFiles.Unlock()
	f, err := os.Create(filepath.Join(dir, filepath.Base(name)))
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(f)
	since := func(t metav1.Time) time.Duration {
		if t.IsZero() {
			return 0
		}
		return t.Sub(start)
	}
	record := func(typ string, p *corev1.Pod, at time.Duration) {
		ev := PodEvent{At: at, Type: typ, Name: p.Name, IP: p.Status.PodIP, Node: p.Spec.NodeName,
			Created: since(p.CreationTimestamp), Phase: string(p.Status.Phase)}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				ev.Ready = c.Status == corev1.ConditionTrue
				ev.ReadySince = since(c.LastTransitionTime)
			}
		}
		if p.DeletionTimestamp != nil {
			d := since(*p.DeletionTimestamp)
			ev.Deleted = &d
		}
		_ = enc.Encode(ev)
	}
	for i := range list.Items {
		record("INITIAL", &list.Items[i], 0)
	}
	wctx, cancel := context.WithCancel(ctx)
	w, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, opts)
		},
	})
	if err != nil {
		cancel()
		f.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			record(string(ev.Type), p, time.Since(start))
		}
	}()
	return func() error {
		cancel()
		w.Stop()
		<-done
		return f.Close()
	}, nil
}
