package e2ebench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/internal/apimetrics"
	"github.com/fleetslice/fleetslice/internal/localset"
)

// endpointSliceWrites reads the API server's EndpointSlice writes by verb; rejected writes (409
// conflicts) are counted as "conflict" on top.
func endpointSliceWrites(ctx context.Context, cfg *rest.Config) (map[string]int, error) {
	raw, err := apimetrics.Scrape(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return countEndpointSliceWrites(raw)
}

func countEndpointSliceWrites(exposition []byte) (map[string]int, error) {
	writes, err := apimetrics.CountWrites(exposition, func(resource string) bool { return resource == "endpointslices" })
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for w, n := range writes.Served {
		out[w.Verb] += n
	}
	for _, n := range writes.Conflicts {
		out["conflict"] += n
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
