package datapathbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// readiness is one observed change of a Pod's Ready condition, timed when our watch saw it.
type readiness struct {
	at    time.Time
	ready bool
}

// transitions records, from a watch, when each Pod of a namespace was seen to become ready and
// not ready. A watch sees a write within milliseconds of the API server accepting it, so these
// times stand for the writes themselves (the conditions' own timestamps have whole seconds).
type transitions struct {
	mu     sync.Mutex
	seen   map[string][]readiness
	notify chan struct{}
	stop   context.CancelFunc
}

func watchTransitions(ctx context.Context, cs kubernetes.Interface, namespace string) (*transitions, error) {
	t := &transitions{seen: map[string][]readiness{}, notify: make(chan struct{})}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", namespace, fields.Everything())
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, obj any) { t.observe(obj) },
	}); err != nil {
		return nil, err
	}
	ctx, t.stop = context.WithCancel(ctx)
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.stop()
		return nil, fmt.Errorf("the Pods of %s did not sync", namespace)
	}
	return t, nil
}

func (t *transitions) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ready := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if seen := t.seen[pod.Name]; len(seen) == 0 || seen[len(seen)-1].ready != ready {
		t.seen[pod.Name] = append(seen, readiness{at: time.Now(), ready: ready})
		close(t.notify)
		t.notify = make(chan struct{})
	}
}

// await returns when pod was first seen in the given readiness at or after since.
func (t *transitions) await(ctx context.Context, pod string, ready bool, since time.Time) (time.Time, error) {
	for {
		t.mu.Lock()
		for _, r := range t.seen[pod] {
			if r.ready == ready && !r.at.Before(since) {
				t.mu.Unlock()
				return r.at, nil
			}
		}
		changed := t.notify
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("pod %s was not seen ready=%t: %w", pod, ready, ctx.Err())
		case <-changed:
		}
	}
}

func (t *transitions) close() { t.stop() }
