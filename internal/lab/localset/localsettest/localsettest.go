// Package localsettest holds what the suites that run on a local ClusterSet (test/datapath,
// test/kubeproxy, test/managed) share: building the binaries they start, listing a workload's
// Pods, and tearing everything down in the order that leaves nothing behind.
package localsettest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

// BuildBinaries builds the named commands of this module (manager, agent, fleetslice-dns, ...)
// into a new temporary directory, as `make build` would.
func BuildBinaries(ctx context.Context, commands ...string) (string, error) {
	dir, err := os.MkdirTemp("", "fleetslice-suite-bin-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", dir}
	for _, c := range commands {
		args = append(args, "github.com/fleetslice/fleetslice/cmd/"+c)
	}
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		return dir, fmt.Errorf("building %s: %w\n%s", strings.Join(commands, ", "), err, out)
	}
	return dir, nil
}

// PodNames lists the names of the Pods labelled app=app in a namespace.
func PodNames(ctx context.Context, c client.Client, ns, app string) ([]string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(pods.Items))
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names, nil
}

// Teardown stops what a suite started, each part once it exists: the pod network first (and
// checks that no namespace of it is left), then the processes in stops, then the ClusterSet,
// then the binaries' directory; log receives the ClusterSet's progress lines. It goes on after a failure and reports every one.
func Teardown(ctx context.Context, network *localset.PodNetwork, stops []func() error, cs *localset.ClusterSet, binDir string, log io.Writer) error {
	var errs []error
	if network != nil {
		prefix := network.Network.Prefix
		errs = append(errs, network.Stop())
		out, err := exec.Command("ip", "netns", "list").Output()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("listing network namespaces: %w", err))
		case strings.Contains(string(out), prefix):
			errs = append(errs, fmt.Errorf("stopping the pod network left namespaces %s*:\n%s", prefix, out))
		}
	}
	for _, stop := range stops {
		errs = append(errs, stop())
	}
	if cs != nil {
		errs = append(errs, localset.Remove(ctx, cs.Workdir, log))
	}
	if binDir != "" {
		errs = append(errs, os.RemoveAll(binDir))
	}
	return errors.Join(errs...)
}
