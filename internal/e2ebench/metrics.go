package e2ebench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/internal/localset"
)

// verbNames maps the API server's request verbs to the words the tables use.
var verbNames = map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "DELETECOLLECTION": "delete"}

// endpointSliceWrites reads the API server's apiserver_request_total for EndpointSlice writes, by
// verb; rejected writes (409 conflicts) are counted as "conflict" on top.
func endpointSliceWrites(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading API server metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing API server metrics: %w", err)
	}
	out := map[string]int{}
	family := families["apiserver_request_total"]
	if family == nil {
		return out, nil
	}
	for _, m := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		verb, ok := verbNames[labels["verb"]]
		if labels["resource"] != "endpointslices" || !ok {
			continue
		}
		n := int(m.GetCounter().GetValue())
		out[verb] += n
		if labels["code"] == "409" {
			out["conflict"] += n
		}
	}
	return out, nil
}

// ControllerManagerPID finds the kube-controller-manager kwokctl runs for a cluster.
func ControllerManagerPID(cs *localset.ClusterSet, cluster string) (int, error) {
	marker := filepath.Join(cs.Workdir, "kwok", "clusters", cluster, "bin", "kube-controller-manager")
	for _, p := range localset.ProcessesUnder(cs.Workdir) {
		pid, cmdline, _ := strings.Cut(p, ": ")
		if strings.HasPrefix(cmdline, marker) {
			return strconv.Atoi(pid)
		}
	}
	return 0, fmt.Errorf("no kube-controller-manager process for %s", cluster)
}

// ResidentBytes returns a process's resident set size, 0 if it cannot be read.
func ResidentBytes(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
