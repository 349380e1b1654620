package datapathbench

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// grow exports background Services until the ClusterSet holds n besides the sampled one, and
// waits until the importer holds all of them, each with its ClusterSet IP and imported slice.
func (w *world) grow(ctx context.Context, n int) (time.Duration, error) {
	began := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := w.background; i < n; i++ {
		g.Go(func() error {
			svc, slice, export := background(i)
			for _, obj := range []client.Object{svc, slice, export} {
				if err := w.exp.Create(gctx, obj); err != nil {
					return fmt.Errorf("creating %s: %w", backgroundName(i), err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	w.background = max(w.background, n)
	ctx, cancel := context.WithTimeout(ctx, w.s.timeout)
	defer cancel()
	_, err := poll(ctx, func() (struct{}, bool) {
		var imports mcsv1beta1.ServiceImportList
		var slices discoveryv1.EndpointSliceList
		if w.imp.List(ctx, &imports, client.InNamespace(namespace)) != nil ||
			w.imp.List(ctx, &slices, client.InNamespace(namespace), client.HasLabels{mcsv1beta1.LabelServiceName}) != nil {
			return struct{}{}, false
		}
		withIP := 0
		for _, imp := range imports.Items {
			if len(imp.Spec.IPs) > 0 {
				withIP++
			}
		}
		return struct{}{}, withIP >= n+1 && len(slices.Items) >= n+1
	})
	if err != nil {
		return 0, fmt.Errorf("%s did not import all %d Services: %w", w.importer, n+1, err)
	}
	return time.Since(began), nil
}

// sample times one Pod of the exporter becoming ready and then not ready, as both clients see it.
//
// The Pod starts not ready (its flag exists) and is only made ready once no client reaches it:
// kwok marks every Pod it runs Ready for a moment before the pod runtime's probe corrects it, and
// a client reached through that moment would be timed from the wrong write.
func (w *world) sample(ctx context.Context, pod string, f *sizeFigures) error {
	ctx, cancel := context.WithTimeout(ctx, w.s.timeout)
	defer cancel()
	flag := w.flag(pod)
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		return err
	}
	created := time.Now()
	if err := w.exp.Create(ctx, echoPod(pod, flag)); err != nil {
		return err
	}
	defer func() {
		_ = w.exp.Delete(context.WithoutCancel(ctx), &corev1.Pod{ObjectMeta: objectMeta(namespace, pod)}, client.GracePeriodSeconds(0))
	}()
	if _, err := w.trans.await(ctx, pod, false, created); err != nil {
		return err
	}
	for _, side := range w.sides(f) {
		if err := w.untilQuiet(ctx, side.r, pod, created); err != nil {
			return fmt.Errorf("before it was made ready: %w", err)
		}
	}

	flagRemoved := time.Now()
	if err := os.Remove(flag); err != nil {
		return err
	}
	readyAt, err := w.trans.await(ctx, pod, true, flagRemoved)
	if err != nil {
		return err
	}
	for _, side := range w.sides(f) {
		first, err := pollFor(ctx, w.s.answerTimeout, func() (time.Time, bool) { return firstAnswer(side.r.since(flagRemoved), pod) })
		if err != nil {
			side.p.MissingReady++
			continue
		}
		side.p.Ready = append(side.p.Ready, first.Sub(readyAt))
	}

	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		return err
	}
	notReadyAt, err := w.trans.await(ctx, pod, false, readyAt)
	if err != nil {
		return err
	}
	for _, side := range w.sides(f) {
		if err := w.untilQuiet(ctx, side.r, pod, notReadyAt); err != nil {
			side.p.MissingStopped++
			continue
		}
		requests := side.r.since(readyAt)
		stopped, ok := stoppedAt(requests, pod, notReadyAt)
		if !ok {
			side.p.MissingStopped++
			continue
		}
		side.p.Stopped = append(side.p.Stopped, stopped.Sub(notReadyAt))
		side.p.Requests += len(requests)
		side.p.Failed += failed(requests)
	}
	return nil
}

type side struct {
	r *requester
	p *pathFigures
}

func (w *world) sides(f *sizeFigures) []side {
	return []side{{w.inCluster, &f.InCluster}, {w.across, &f.CrossCluster}}
}

// untilQuiet waits until r has not reached pod for the quiet window, counting only requests
// started after since; it gives up after the answer timeout.
func (w *world) untilQuiet(ctx context.Context, r *requester, pod string, since time.Time) error {
	minRequests := max(3, int(w.s.quiet/(4*w.s.pause)))
	_, err := pollFor(ctx, w.s.answerTimeout, func() (struct{}, bool) {
		now := time.Now()
		return struct{}{}, now.Sub(since) >= w.s.quiet && quietFor(r.since(since), pod, now, w.s.quiet, minRequests)
	})
	if err != nil {
		return fmt.Errorf("requests to %s still reached %s: %w", r.addr, pod, err)
	}
	return nil
}
