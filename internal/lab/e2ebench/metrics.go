package e2ebench

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

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
