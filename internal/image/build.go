package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Build says what `make docker-build` builds and where.
type Build struct {
	// Root is the repository's top directory.
	Root string
	// OutDir receives manager.tar and agent.tar.
	OutDir string
	// ManagerRef and AgentRef tag the images (IMG and AGENT_IMG).
	ManagerRef, AgentRef string
	// DNSRef tags the fleetslice-dns image (DNS_IMG); empty skips it.
	DNSRef string
	// Lock pins the agent's Debian packages; CacheDir keeps their downloads.
	Lock, CacheDir string
	// Meta stamps the images; GitMeta reads it from the checkout.
	Meta Meta
}

// Result describes one written image archive.
type Result struct {
	Name, Ref, Path string
	Digest          v1.Hash
	// Size is the sum of the compressed layers, what a node pulls.
	Size int64
}

// Run builds the binaries and images and writes their archives: manager, agent, then
// fleetslice-dns when DNSRef is set.
func (b Build) Run(ctx context.Context) ([]Result, error) {
	pkgs, err := ReadLock(b.Lock)
	if err != nil {
		return nil, err
	}
	debs, err := Fetch(pkgs, b.CacheDir)
	if err != nil {
		return nil, err
	}
	binDir, err := os.MkdirTemp("", "fleetslice-image-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	if err := os.MkdirAll(b.OutDir, 0o755); err != nil {
		return nil, err
	}
	type spec struct {
		name, ref string
		image     func(binary string) (v1.Image, error)
	}
	specs := []spec{
		{"manager", b.ManagerRef, func(bin string) (v1.Image, error) { return Manager(bin, b.Meta) }},
		{"agent", b.AgentRef, func(bin string) (v1.Image, error) { return Agent(bin, debs, b.Meta) }},
	}
	if b.DNSRef != "" {
		specs = append(specs, spec{"fleetslice-dns", b.DNSRef, func(bin string) (v1.Image, error) { return DNS(bin, b.Meta) }})
	}
	var results []Result
	for _, spec := range specs {
		bin := filepath.Join(binDir, spec.name)
		if err := GoBinary(ctx, b.Root, "./cmd/"+spec.name, bin, b.Meta.Version); err != nil {
			return nil, err
		}
		img, err := spec.image(bin)
		if err != nil {
			return nil, fmt.Errorf("assembling the %s image: %w", spec.name, err)
		}
		path := filepath.Join(b.OutDir, spec.name+".tar")
		if err := WriteOCIArchive(img, spec.ref, path, b.Meta.Created); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		r := Result{Name: spec.name, Ref: spec.ref, Path: path}
		if r.Digest, err = img.Digest(); err != nil {
			return nil, err
		}
		if r.Size, err = compressedSize(img); err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	return results, nil
}

func compressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// GoBinary builds a static linux/amd64 binary of pkg with nothing in it that differs between
// two builds of one commit (no paths, build id or VCS stamp), and the release stamped in.
func GoBinary(ctx context.Context, root, pkg, out, version string) error {
	ldflags := "-s -w -buildid= -X github.com/fleetslice/fleetslice/pkg/version.Version=" + version
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(string(output)))
	}
	return nil
}

// GitMeta reads the version, commit and commit time of the checkout at root. SOURCE_DATE_EPOCH,
// when set, overrides the time, as reproducible-builds tools expect.
func GitMeta(root string) (Meta, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), exitDetail(err))
		}
		return strings.TrimSpace(string(out)), nil
	}
	var m Meta
	var err error
	if m.Revision, err = git("rev-parse", "HEAD"); err != nil {
		return m, err
	}
	if m.Version, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
		return m, err
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return m, err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return m, fmt.Errorf("commit time %q: %w", epoch, err)
	}
	m.Created = time.Unix(secs, 0).UTC()
	return m, nil
}
