package e2ebench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/internal/localset"
)

// verbNames maps the API server's request verbs to the words the tables use.
var verbNames = map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "DELETECOLLECTION": "delete"}

// endpointSliceWrites reads the API server's apiserver_request_total for EndpointSlice writes, by
// verb; rejected writes (409 conflicts) are counted as "conflict" on top. It is polled every
// half second during a rollout, so it picks out the few lines it needs instead of parsing the
// whole (megabytes of) exposition: a full parse made the bench itself a noticeable CPU load.
func endpointSliceWrites(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading API server metrics: %w", err)
	}
	return countEndpointSliceWrites(raw)
}

func countEndpointSliceWrites(exposition []byte) (map[string]int, error) {
	const prefix = "apiserver_request_total{"
	out := map[string]int{}
	for line := range bytes.Lines(exposition) {
		if !bytes.HasPrefix(line, []byte(prefix)) || !bytes.Contains(line, []byte(`resource="endpointslices"`)) {
			continue
		}
		closing := bytes.LastIndexByte(line, '}')
		if closing < 0 {
			return nil, fmt.Errorf("malformed metric line %q", line)
		}
		labels := parseLabels(string(line[len(prefix):closing]))
		verb, ok := verbNames[labels["verb"]]
		if !ok {
			continue
		}
		value, err := strconv.ParseFloat(strings.TrimSpace(string(line[closing+1:])), 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		out[verb] += int(value)
		if labels["code"] == "409" {
			out["conflict"] += int(value)
		}
	}
	return out, nil
}

// parseLabels splits `a="x",b="y"`; the API server's label values here hold no quotes or commas.
func parseLabels(s string) map[string]string {
	labels := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		name, value, ok := strings.Cut(pair, "=")
		if ok {
			labels[name] = strings.Trim(value, `"`)
		}
	}
	return labels
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
