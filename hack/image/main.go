// Command image builds, loads and pushes fleetslice's container images without a container
// runtime (make docker-build, make docker-push), and pins the agent's Debian packages.
//
//	go run ./hack/image build --img IMG --agent-img AGENT_IMG --dns-img DNS_IMG --out dist
//	go run ./hack/image push --out dist
//	go run ./hack/image lock
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
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fleetslice/fleetslice/internal/image"
)

// nftPackages are nft and every library it loads on Debian bookworm (ldd /usr/sbin/nft).
var nftPackages = []string{
	"nftables", "libnftables1", "libedit2", "libc6", "libmnl0", "libnftnl11", "libxtables12",
	"libjansson4", "libgmp10", "libtinfo6", "libbsd0", "libmd0",
}

const lockHeader = `# Debian bookworm (amd64) packages that make up the agent image's nft: the program and every
# shared library it loads (ldd /usr/sbin/nft). Pinned by version and verified by SHA-256, so two
# builds of one commit give the same image. ` + "`go run ./hack/image lock`" + ` rewrites this file from
# what apt offers now (after a Debian point release replaced one of these versions).
# package	version	sha256
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|push|lock [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := fs.String("out", "dist", "directory of the image archives")
	img := fs.String("img", "ghcr.io/fleetslice/manager:latest", "manager image reference")
	agentImg := fs.String("agent-img", "ghcr.io/fleetslice/agent:latest", "agent image reference")
	dnsImg := fs.String("dns-img", "ghcr.io/fleetslice/dns:latest", "fleetslice-dns image reference (empty: do not build it)")
	lock := fs.String("lock", "hack/image/agent-packages.lock", "pinned Debian packages of the agent image")
	cache := fs.String("cache", image.DefaultCacheDir(), "download cache of Debian packages")
	load := fs.Bool("load", true, "load the images into docker or podman when one of them answers")
	_ = fs.Parse(os.Args[2:])

	var err error
	switch os.Args[1] {
	case "build":
		err = build(*out, *img, *agentImg, *dnsImg, *lock, *cache, *load)
	case "push":
		err = push(*out)
	case "lock":
		err = writeLock(*lock, *cache)
	default:
		err = fmt.Errorf("unknown command %q: want build, push or lock", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(out, img, agentImg, dnsImg, lock, cache string, load bool) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	meta, err := image.GitMeta(root)
	if err != nil {
		return err
	}
	b := image.Build{Root: root, OutDir: out, ManagerRef: img, AgentRef: agentImg, DNSRef: dnsImg, Lock: lock, CacheDir: cache, Meta: meta}
	results, err := b.Run(context.Background())
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Printf("%s\t%s\t%s\t%.1f MiB compressed\t%s\n", r.Name, r.Ref, r.Digest, float64(r.Size)/(1<<20), r.Path)
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
// and podman logins leave behind (the default keychain).
func push(out string) error {
	for _, n := range []string{"manager", "agent", "fleetslice-dns"} {
		path := filepath.Join(out, n+".tar")
		if _, err := os.Stat(path); n == "fleetslice-dns" && err != nil {
			continue // built only when asked for
		}
		img, ref, cleanup, err := image.ReadOCIArchive(path)
		if err != nil {
			return fmt.Errorf("%w (run make docker-build first)", err)
		}
		tag, err := name.NewTag(ref)
		if err == nil {
			err = remote.Write(tag, img, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		}
		cleanup()
		if err != nil {
			return fmt.Errorf("pushing %s to %s: %w", path, ref, err)
		}
		fmt.Printf("pushed %s\n", ref)
	}
	return nil
}

func writeLock(lock, cache string) error {
	pkgs, err := image.Candidates(nftPackages, cache)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(lockHeader)
	for _, p := range pkgs {
		fmt.Fprintf(&b, "%s\t%s\t%s\n", p.Name, p.Version, p.SHA256)
	}
	return os.WriteFile(lock, []byte(b.String()), 0o644)
}
