package slicediff

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

// A trace is the Pod events one phase of the endpointslice-e2e bench saw on a real (simulated)
// cluster, recorded with e2ebench.TraceDirEnv. Replaying it streams the same changes at the same
// times through either controller, so a coalescing or placement decision can be judged against
// the event timing of a real control plane, in seconds.

// ReadTrace parses a trace file's JSON lines.
func ReadTrace(r io.Reader) ([]e2ebench.PodEvent, error) {
	var out []e2ebench.PodEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev e2ebench.PodEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", len(out)+1, err)
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// TraceScenario replays phases, recorded one after the other on one cluster, as one run: the first
// phase's starting Pods are synced before measuring starts, and each later phase continues from
// where the one before left off (its own starting Pods are those already there). Each sync takes
// cost (nil: no time), with syncs as the events come (see streaming).
func TraceScenario(name string, phases [][]e2ebench.PodEvent, cost func(writes int64) time.Duration) Scenario {
	return Scenario{Name: name, Describe: func(Size) string { return "a recorded trace of " + name },
		run: func(w *world, _ Size, _ *rand.Rand) { playTrace(w, phases, cost) }}
}

// traceStart is where the first phase begins on the scenario clock; each later one begins an hour
// after the one before ended.
var traceStart = epoch.Add(time.Hour)

func playTrace(w *world, phases [][]e2ebench.PodEvent, cost func(writes int64) time.Duration) {
	var nodes []string
	for _, events := range phases {
		for _, ev := range events {
			if ev.Node != "" && !slices.Contains(nodes, ev.Node) {
				nodes = append(nodes, ev.Node)
			}
		}
	}
	slices.Sort(nodes)
	for i, n := range nodes {
		node := nodeObject(i, zones[i%len(zones)])
		node.Name = n
		node.Labels[corev1.LabelHostname] = n
		w.putNode(node)
	}
	w.putService(serviceObject(false))
	pods := map[string]*corev1.Pod{}
	start := traceStart
	for k, events := range phases {
		i := 0
		for ; i < len(events) && events[i].Type == "INITIAL"; i++ {
			if k == 0 {
				pods[events[i].Name] = tracedPod(events[i], start)
				w.store.putPod(pods[events[i].Name])
			}
		}
		if k == 0 {
			w.startStreaming(cost)
		}
		for _, ev := range events[i:] {
			w.advance(start.Add(ev.At))
			old := pods[ev.Name]
			if ev.Type == "DELETED" {
				delete(pods, ev.Name)
				w.store.deletePod(types.NamespacedName{Namespace: namespace, Name: ev.Name})
				if old != nil && endpointslice.PodChangeMatters(endpointslice.CachePod(old), nil) {
					w.changed()
				}
				continue
			}
			pod := tracedPod(ev, start)
			pods[ev.Name] = pod
			w.store.putPod(pod)
			if endpointslice.PodChangeMatters(endpointslice.CachePod(old), endpointslice.CachePod(pod)) {
				w.changed()
			}
		}
		start = w.clock.Add(time.Hour)
		w.advance(start)
	}
	w.flush()
}

// tracedPod is the Pod a trace event of a phase that began at start describes, in the scenarios'
// namespace and selected by their Service.
func tracedPod(ev e2ebench.PodEvent, start time.Time) *corev1.Pod {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(start.Add(d)) }
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: ev.Name, UID: types.UID("uid-" + ev.Name),
			Labels:            map[string]string{"app": serviceName},
			CreationTimestamp: at(ev.Created),
		},
		Spec: corev1.PodSpec{
			NodeName: ev.Node,
			Containers: []corev1.Container{{
				Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPhase(ev.Phase)},
	}
	if ev.IP != "" {
		pod.Status.PodIP = ev.IP
		pod.Status.PodIPs = []corev1.PodIP{{IP: ev.IP}}
	}
	if ev.ReadySince != 0 || ev.Ready {
		status := corev1.ConditionFalse
		if ev.Ready {
			status = corev1.ConditionTrue
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: at(ev.ReadySince)}}
	}
	if ev.Deleted != nil {
		pod.DeletionTimestamp = ptr.To(at(*ev.Deleted))
		pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
	}
	return pod
}
