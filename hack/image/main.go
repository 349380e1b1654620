// Command image builds, loads and pushes fleetslice's container images without a container
// runtime (make docker-build, make docker-push), from the Go module proxy alone.
//
//	go run ./hack/image build --registry REGISTRY --tag VERSION [--img IMG --agent-img AGENT_IMG --dns-img DNS_IMG] --platforms linux/amd64,linux/arm64 --out dist
//	go run ./hack/image push --out dist
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fleetslice/fleetslice/internal/release/image"
)

// archives are what build writes and push sends, in this order.
var archives = []image.Kind{image.ManagerKind, image.AgentKind, image.DNSKind}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := fs.String("out", "dist", "directory of the image archives and of "+image.DigestsFile)
	registry := fs.String("registry", image.DefaultRegistry, "registry and path the images are named under (REGISTRY)")
	tag := fs.String("tag", "", "tag of every image (VERSION); empty: the release in pkg/version")
	img := fs.String("img", "", "manager image reference (IMG); empty: REGISTRY/manager:VERSION")
	agentImg := fs.String("agent-img", "", "agent image reference (AGENT_IMG); empty: REGISTRY/agent:VERSION")
	dnsImg := fs.String("dns-img", "", "fleetslice-dns image reference (DNS_IMG); empty: REGISTRY/dns:VERSION")
	platforms := fs.String("platforms", image.DefaultPlatforms, "platforms each image index holds (PLATFORMS)")
	load := fs.Bool("load", true, "load the images into docker or podman when one of them answers")
	_ = fs.Parse(os.Args[2:])

	var err error
	switch os.Args[1] {
	case "build":
		var refs image.Refs
		refs, err = image.ResolveRefs(*registry, *tag, image.Refs{Manager: *img, Agent: *agentImg, DNS: *dnsImg})
		if err == nil {
			err = build(*out, refs, *platforms, *load)
		}
	case "push":
		err = push(*out)
	default:
		err = fmt.Errorf("unknown command %q: want build or push", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(out string, refs image.Refs, platformList string, load bool) error {
	platforms, err := image.ParsePlatforms(platformList)
	if err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	meta, err := image.GitMeta(root)
	if err != nil {
		return err
	}
	b := image.Build{Root: root, OutDir: out, ManagerRef: refs.Manager, AgentRef: refs.Agent, DNSRef: refs.DNS, Platforms: platforms, Meta: meta}
	results, err := b.Run(context.Background())
	if err != nil {
		return err
	}
	for _, r := range results {
		var sizes []string
		for i, p := range r.Platforms {
			sizes = append(sizes, fmt.Sprintf("%s %.1f MiB", p, float64(r.Sizes[i])/(1<<20)))
		}
		fmt.Printf("%s\t%s\t%s\t%s\t%s\n", r.Name, r.Ref, r.Digest, strings.Join(sizes, ", "), r.Path)
		if load {
			loadInto(r.Path)
		}
	}
	return nil
}

// loadInto hands an archive to the first of docker and podman whose engine answers; with none,
// the archive is the result.
func loadInto(path string) {
	for _, tool := range []string{"docker", "podman"} {
		if _, err := exec.LookPath(tool); err != nil {
			continue
		}
		if err := exec.Command(tool, "info").Run(); err != nil {
			fmt.Printf("%s is installed but its engine does not answer; not loading %s\n", tool, path)
			continue
		}
		if output, err := exec.Command(tool, "load", "-i", path).CombinedOutput(); err != nil {
			fmt.Printf("%s load -i %s failed: %v: %s\n", tool, path, err, strings.TrimSpace(string(output)))
			continue
		}
		fmt.Printf("loaded %s into %s\n", path, tool)
		return
	}
}

// push sends each archive in out to the registry of its reference, with the credentials docker
// and podman logins leave behind (the default keychain), and records the pushed digests in
// out/image-digests.yaml for make build-installer to pin.
func push(out string) error {
	digests := filepath.Join(out, image.DigestsFile)
	pushed, err := image.ReadPushed(digests)
	if err != nil {
		return err
	}
	for _, k := range archives {
		path := filepath.Join(out, k.Name+".tar")
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%w (run make docker-build first)", err)
		}
		ref, digest, err := image.Push(path, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref, digest)
		// Recorded at once: a later push that fails leaves the earlier ones pinned.
		pushed[ref] = digest.String()
		if err := pushed.Write(digests); err != nil {
			return err
		}
	}
	fmt.Println("wrote", digests)
	return nil
}
