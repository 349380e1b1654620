package dataplane

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// BenchmarkKernelMemory programs FLEETSLICE_BENCH_SERVICES Services (5,000 unless set) of
// FLEETSLICE_BENCH_ENDPOINTS endpoints (50 unless set) through the netlink backend, the agent's
// default, then runs a full sync of the unchanged table, and reports what the dataplane's
// memory costs: the live heap the Syncer keeps once a sync is over, and the largest heap goal
// (what GOGC lets the heap reach, so what the resident memory follows) while each sync ran,
// per element of the table. Heap goals move by tens of MB with when the collector happens to
// run, so the same syncs run again in a second namespace with the collector running at every 5%
// of growth, which makes the largest live heap it sees the syncs' peak within a few percent: the
// figure a change to what a sync holds moves. The agent's own cache is not part of it: this is
// the dataplane's share of the agent's peak.
func BenchmarkKernelMemory(b *testing.B) {
	requireKernel(b)
	n := envInt(b, "FLEETSLICE_BENCH_SERVICES", 5000)
	per := envInt(b, "FLEETSLICE_BENCH_ENDPOINTS", 50)
	services := scaleServices(n, per)
	withAffinity(b, services)
	for b.Loop() {
		ns := enterNetns(b, newNetns(b, uniquePrefix(b), "memory"))
		s, _ := openBackend(b, ns, "netlink", knftables.IPv4Family, Options{})
		base := liveHeap()
		cold := watchHeapGoal()
		st := kernelSync(b, s, ns, services, true)
		coldPeak := cold.stop() - base
		kept := liveHeap() - base
		full := watchHeapGoal()
		again := kernelSync(b, s, ns, services, true)
		fullPeak := full.stop() - base
		if again.Operations != 0 {
			b.Fatalf("a full sync of the unchanged table wrote %d operations", again.Operations)
		}
		elems := float64(st.Operations)
		b.ReportMetric(float64(kept)/1e6, "kept-MB")
		b.ReportMetric(float64(kept)/elems, "kept-B/op")
		b.ReportMetric(float64(coldPeak)/1e6, "cold-goal-MB")
		b.ReportMetric(float64(fullPeak)/1e6, "full-goal-MB")
		b.ReportMetric(elems, "table-ops")
		runtime.KeepAlive(s)
		coldLive, fullLive := peakLiveHeaps(b, services)
		b.ReportMetric(float64(coldLive)/1e6, "cold-live-MB")
		b.ReportMetric(float64(fullLive)/1e6, "full-live-MB")
	}
}

// peakLiveHeaps runs a cold sync and a full sync of the unchanged table in a namespace of their
// own with the collector at GOGC=5, and returns the largest live heap each reached above the
// live heap before it.
func peakLiveHeaps(b *testing.B, services []Service) (cold, full uint64) {
	ns := enterNetns(b, newNetns(b, uniquePrefix(b), "memlive"))
	s, _ := openBackend(b, ns, "netlink", knftables.IPv4Family, Options{})
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	base := liveHeap()
	w := watchLiveHeap()
	kernelSync(b, s, ns, services, true)
	cold = w.stop() - base
	w = watchLiveHeap()
	kernelSync(b, s, ns, services, true)
	full = w.stop() - base
	runtime.KeepAlive(s)
	return cold, full
}

func envInt(b *testing.B, name string, def int) int {
	spec := strings.TrimSpace(os.Getenv(name))
	if spec == "" {
		return def
	}
	v, err := strconv.Atoi(spec)
	if err != nil || v <= 0 {
		b.Fatalf("%s: %q", name, spec)
	}
	return v
}

// liveHeap collects and returns the bytes of live heap objects.
func liveHeap() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapGoalWatch samples a heap metric until stopped and keeps the largest.
type heapGoalWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	max  uint64
}

func watchHeapGoal() *heapGoalWatch { return watchMetric("/gc/heap/goal:bytes") }

// watchLiveHeap keeps the largest live heap a collection found (/gc/heap/live:bytes).
func watchLiveHeap() *heapGoalWatch { return watchMetric("/gc/heap/live:bytes") }

func watchMetric(name string) *heapGoalWatch {
	w := &heapGoalWatch{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		s := []metrics.Sample{{Name: name}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			w.max = max(w.max, s[0].Value.Uint64())
			select {
			case <-w.done:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *heapGoalWatch) stop() uint64 {
	close(w.done)
	w.wg.Wait()
	return w.max
}
