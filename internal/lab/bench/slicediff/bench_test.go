package slicediff

import (
	"context"
	"testing"
)

// BenchmarkSyncAfterFlaps measures one sync of a 10,000-endpoint Service after 1% of its Pods
// flipped readiness, for each controller: the steady-state cost the readiness-flaps scenario
// sums up.
func BenchmarkSyncAfterFlaps(b *testing.B) {
	sz := FullSize()
	for _, name := range []string{Upstream, Fleetslice} {
		b.Run(name, func(b *testing.B) {
			w, err := newWorld(context.Background(), name, sz.Nodes)
			if err != nil {
				b.Fatal(err)
			}
			pods := steadyState(w, sz, true, false)
			w.startMeasuring(0)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				b.StopTimer()
				for range sz.Endpoints / 100 {
					r := pods[i%len(pods)]
					i += 97 // coprime with the Pod count, so every step flips different Pods
					if r.stage == podReady {
						w.setPod(r, podUnready)
					} else {
						w.setPod(r, podReady)
					}
				}
				w.pending = 0
				b.StartTimer()
				err := w.controller.sync(context.Background())
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				w.verify()
				b.StartTimer()
			}
			if len(w.result.Failures) > 0 {
				b.Fatalf("broken invariants: %v", w.result.Failures)
			}
		})
	}
}
