package localsettest

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/ops/statusview"
)

// EndpointShares reads the ruleset a dry-run agent rendered and returns each endpoint address's
// share of the new connections to ns/service's port (an endpoint of weight w fills w elements
// of the port's dispatch map). It is empty while the agent has no rules for the port.
func EndpointShares(ruleset, ns, service, port string) (map[string]float64, error) {
	ports, err := statusview.PortEndpoints(ruleset)
	if err != nil {
		return nil, err
	}
	weights := ports[ns+"/"+service+":"+port]
	total := 0
	for _, w := range weights {
		total += w
	}
	out := map[string]float64{}
	for addr, w := range weights {
		out[addr] = float64(w) / float64(total)
	}
	return out, nil
}

// PodClusters maps the IP of every Pod in ns, in every member, to its member.
func PodClusters(ctx context.Context, clients map[string]client.Client, ns string) (map[string]string, error) {
	out := map[string]string{}
	for m, c := range clients {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing Pods of %s: %w", m, err)
		}
		for _, p := range pods.Items {
			if p.Status.PodIP != "" {
				out[p.Status.PodIP] = m
			}
		}
	}
	return out, nil
}

// ClusterShares sums endpoint shares by the endpoints' clusters; an address of no known Pod
// counts under "unknown <address>".
func ClusterShares(endpoints map[string]float64, clusterOf map[string]string) map[string]float64 {
	out := map[string]float64{}
	for addr, share := range endpoints {
		cluster, ok := clusterOf[addr]
		if !ok {
			cluster = "unknown " + addr
		}
		out[cluster] += share
	}
	return out
}

// PodReady reports whether a Pod is Ready and has an IP.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.Status.PodIP != ""
		}
	}
	return false
}

// SetPodReady sets a Running Pod's Ready and ContainersReady conditions through the status
// subresource, as a kubelet would after a readiness probe. kwok leaves them so: its pod-ready
// stage only acts on Pending Pods.
func SetPodReady(ctx context.Context, c client.Client, ns, name string, ready bool) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	var last error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		pod := &corev1.Pod{}
		if last = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); last != nil {
			continue
		}
		if pod.Status.Phase != corev1.PodRunning {
			last = fmt.Errorf("pod %s/%s is %s, not Running yet", ns, name, pod.Status.Phase)
			continue
		}
		found := false
		for i := range pod.Status.Conditions {
			if cond := &pod.Status.Conditions[i]; cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
				cond.Status, cond.LastTransitionTime = status, metav1.Now()
				found = found || cond.Type == corev1.PodReady
			}
		}
		if !found {
			pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()})
		}
		if last = c.Status().Update(ctx, pod); last == nil {
			return nil
		}
	}
	return fmt.Errorf("setting pod %s/%s ready=%t: %w", ns, name, ready, last)
}
