// Package k8sbin finds the Kubernetes binaries that hack/k8s-binaries.sh builds from source.
//
// The machines fleetslice is developed and tested on cannot download release binaries, so every
// tool that starts a control plane (envtest suites, `fleetslice up`) looks them up here instead of
// in a hard-coded path.
package k8sbin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Versions built by hack/k8s-binaries.sh. Keep them in step with that script.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.16"
	KwokVersion       = "v0.8.0"
)

// Names of the binaries the cache holds.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	Kwok                  = "kwok"
	Kwokctl               = "kwokctl"
	// Helm renders the chart in dist/chart for the installer's tests.
	Helm = "helm"
	// KubeProxy runs beside the agent in the agent bench only, so it is built on its own
	// (`make kube-proxy`, `hack/k8s-binaries.sh kube-proxy`) and is not part of the default set.
	KubeProxy = "kube-proxy"
)

var all = []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, Kubectl, Kwok, Kwokctl, Helm}

// CacheDir is where hack/k8s-binaries.sh puts the binaries on this machine.
func CacheDir() string {
	root := os.Getenv("FLEETSLICE_CACHE")
	if root == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				home = os.TempDir()
			}
			base = filepath.Join(home, ".cache")
		}
		root = filepath.Join(base, "fleetslice")
	}
	return filepath.Join(root, fmt.Sprintf("k8s-%s-etcd-%s-kwok-%s", KubernetesVersion, EtcdVersion, KwokVersion))
}

// Dir returns the directory holding the named binaries (every binary when none are named):
// $KUBEBUILDER_ASSETS when it is set (envtest's own convention), otherwise the build cache. It
// fails with a hint when a binary is missing.
func Dir(names ...string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = CacheDir()
	}
	if len(names) == 0 {
		names = all
	}
	var missing []error
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, fmt.Errorf("%s not found in %s", name, dir))
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("kubernetes binaries missing (run `make k8s-binaries` once to build them): %w",
			errors.Join(missing...))
	}
	return dir, nil
}

// Path returns the full path of one binary.
func Path(name string) (string, error) {
	dir, err := Dir(name)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}
