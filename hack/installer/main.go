// Command installer writes what `make build-installer` ships: dist/install.yaml (a member
// cluster), dist/broker.yaml (a ClusterSet's broker) and the Helm chart in dist/chart.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fleetslice/fleetslice/internal/installer"
)

func main() {
	img := flag.String("img", "ghcr.io/fleetslice/manager:latest", "manager image")
	agentImg := flag.String("agent-img", "ghcr.io/fleetslice/agent:latest", "agent image")
	dnsImg := flag.String("dns-img", "ghcr.io/fleetslice/dns:latest", "fleetslice-dns image")
	agentAPIServer := flag.String("agent-api-server", "", "the API server's host:port for the agent, on clusters where it replaces kube-proxy (empty: the kubernetes Service)")
	kustomize := flag.String("kustomize", "bin/kustomize", "kustomize binary")
	out := flag.String("out", "dist", "output directory")
	version := flag.String("version", "0.1.0", "the chart's appVersion")
	flag.Parse()
	if err := write(installer.Options{Root: ".", Kustomize: *kustomize, ManagerImage: *img, AgentImage: *agentImg, DNSImage: *dnsImg, AgentAPIServer: *agentAPIServer}, *out, *version); err != nil {
		fmt.Fprintln(os.Stderr, "installer:", err)
		os.Exit(1)
	}
}

func write(o installer.Options, out, version string) error {
	files, err := installer.Files(o, version)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(out, "chart")); err != nil {
		return err
	}
	for path, content := range files {
		full := filepath.Join(out, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", full)
	}
	return nil
}
