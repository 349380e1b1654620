package localsettest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
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

// KernelEndpointShares reads what a real agent programmed into the kernel of a Node's network
// namespace (nodeNetns, under /run/netns) and returns each endpoint address's share of the new
// TCP connections to ip:port, a cluster or ClusterSet IP: the elements of the shared
// cluster-endpoints-tcp map under that address and port, through which the agent's pick chain
// spreads new connections evenly (an endpoint of weight w fills w elements). It is the kernel's
// counterpart of EndpointShares, read with `nft -j`; an error says the agent has not written the
// map yet or nft is missing, and an empty map that the port has no endpoints.
func KernelEndpointShares(ctx context.Context, nodeNetns, ip string, port int) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nodeNetns,
		"nft", "-j", "list", "map", "ip", "fleetslice", "cluster-endpoints-tcp").Output()
	if err != nil {
		var stderr []byte
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			stderr = exit.Stderr
		}
		return nil, fmt.Errorf("listing the agent's cluster-endpoints-tcp map in %s: %w: %s", nodeNetns, err, bytes.TrimSpace(stderr))
	}
	var listing struct {
		Nftables []struct {
			Map *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"map"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &listing); err != nil {
		return nil, fmt.Errorf("reading nft's listing of %s: %w", nodeNetns, err)
	}
	counts := map[string]int{}
	total := 0
	for _, item := range listing.Nftables {
		if item.Map == nil {
			continue
		}
		for _, raw := range item.Map.Elem {
			key, value, err := mapElement(raw)
			if err != nil {
				return nil, fmt.Errorf("an element of %s's cluster-endpoints-tcp map: %w", nodeNetns, err)
			}
			if len(key) != 3 || fmt.Sprint(key[0]) != ip || fmt.Sprint(key[1]) != strconv.Itoa(port) {
				continue
			}
			if len(value) != 2 {
				return nil, fmt.Errorf("element %s of %s's cluster-endpoints-tcp map has no address . port value", raw, nodeNetns)
			}
			counts[fmt.Sprint(value[0])]++
			total++
		}
	}
	shares := map[string]float64{}
	for addr, c := range counts {
		shares[addr] = float64(c) / float64(total)
	}
	return shares, nil
}

// mapElement splits an element of an nft JSON map listing, [key, value], into the parts of
// its concatenated key and value. A key with options (a comment, a timeout) comes as
// {"elem": {"val": key, ...}}.
func mapElement(raw json.RawMessage) (key, value []any, err error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return nil, nil, fmt.Errorf("%s is not a [key, value] pair", raw)
	}
	concat := func(raw json.RawMessage) ([]any, error) {
		var v struct {
			Concat []any `json:"concat"`
			Elem   *struct {
				Val struct {
					Concat []any `json:"concat"`
				} `json:"val"`
			} `json:"elem"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("%s is not a concatenation", raw)
		}
		if v.Elem != nil {
			return v.Elem.Val.Concat, nil
		}
		return v.Concat, nil
	}
	if key, err = concat(pair[0]); err != nil {
		return nil, nil, err
	}
	value, err = concat(pair[1])
	return key, value, err
}
