// Command installer writes what `make build-installer` ships: dist/install.yaml (a member
// cluster), dist/crds.yaml (its CRDs alone, applied before a Helm upgrade), dist/broker.yaml (a
// ClusterSet's broker) and the Helm chart in dist/chart. Images are named as `make docker-build`
// names them and pinned by the digests `make docker-push` recorded in --digests.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fleetslice/fleetslice/internal/release/image"
	"github.com/fleetslice/fleetslice/internal/release/installer"
	"github.com/fleetslice/fleetslice/pkg/version"
)

func main() {
	registry := flag.String("registry", image.DefaultRegistry, "registry and path the images are named under (REGISTRY)")
	tag := flag.String("tag", "", "tag of every image (VERSION); empty: the release in pkg/version")
	img := flag.String("img", "", "manager image (IMG); empty: REGISTRY/manager:VERSION")
	agentImg := flag.String("agent-img", "", "agent image (AGENT_IMG); empty: REGISTRY/agent:VERSION")
	dnsImg := flag.String("dns-img", "", "fleetslice-dns image (DNS_IMG); empty: REGISTRY/dns:VERSION")
	digests := flag.String("digests", filepath.Join("dist", image.DigestsFile), "digests make docker-push recorded; the images listed there are pinned by digest")
	agentAPIServer := flag.String("agent-api-server", "", "the API server's host:port for the agent, on clusters where it replaces kube-proxy (empty: the kubernetes Service)")
	kustomize := flag.String("kustomize", "bin/kustomize", "kustomize binary")
	out := flag.String("out", "dist", "output directory")
	flag.Parse()
	if err := run(*registry, *tag, image.Refs{Manager: *img, Agent: *agentImg, DNS: *dnsImg}, *digests, *agentAPIServer, *kustomize, *out); err != nil {
		fmt.Fprintln(os.Stderr, "installer:", err)
		os.Exit(1)
	}
}

func run(registry, tag string, set image.Refs, digests, agentAPIServer, kustomize, out string) error {
	refs, err := image.ResolveRefs(registry, tag, set)
	if err != nil {
		return err
	}
	pushed, err := image.ReadPushed(digests)
	if err != nil {
		return err
	}
	o := installer.Options{
		Root: ".", Kustomize: kustomize,
		ManagerImage: pushed.Pin(refs.Manager), AgentImage: pushed.Pin(refs.Agent), DNSImage: pushed.Pin(refs.DNS),
		AgentAPIServer: agentAPIServer,
	}
	for _, ref := range []string{o.ManagerImage, o.AgentImage, o.DNSImage} {
		if !strings.Contains(ref, "@") {
			fmt.Printf("%s is not pinned: %s records no push of it (make docker-push writes it)\n", ref, digests)
		}
	}
	appVersion := tag
	if appVersion == "" {
		appVersion = version.Release
	}
	return write(o, out, appVersion)
}

func write(o installer.Options, out, appVersion string) error {
	files, err := installer.Files(o, appVersion)
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
