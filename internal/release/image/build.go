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
	"golang.org/x/sync/errgroup"
)

// Build says what `make docker-build` builds and where.
type Build struct {
	// Root is the repository's top directory.
	Root string
	// OutDir receives manager.tar, agent.tar and fleetslice-dns.tar.
	OutDir string
	// ManagerRef and AgentRef tag the images (IMG and AGENT_IMG).
	ManagerRef, AgentRef string
	// DNSRef tags the fleetslice-dns image (DNS_IMG); empty skips it.
	DNSRef string
	// Platforms each image is built for, gathered into one index per image. Empty builds only
	// the running machine's (HostPlatform): what a test can run, in half the time.
	Platforms []v1.Platform
	// Meta stamps the images; GitMeta reads it from the checkout.
	Meta Meta
}

// Result describes one written image archive.
type Result struct {
	Name, Ref, Path string
	// Digest is the image index's: what a push of the archive produces and what to pin.
	Digest v1.Hash
	// Platforms are the index's, in order, and Sizes the compressed size of each platform's
	// image (what a node pulls).
	Platforms []v1.Platform
	Sizes     []int64
}

// Run cross-compiles the binaries and writes one archive per image: manager, agent, then
// fleetslice-dns when DNSRef is set. Nothing is fetched but Go modules.
func (b Build) Run(ctx context.Context) ([]Result, error) {
	platforms := b.Platforms
	if len(platforms) == 0 {
		platforms = []v1.Platform{HostPlatform()}
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
		kind Kind
		ref  string
	}
	specs := []spec{{ManagerKind, b.ManagerRef}, {AgentKind, b.AgentRef}}
	if b.DNSRef != "" {
		specs = append(specs, spec{DNSKind, b.DNSRef})
	}
	var results []Result
	for _, spec := range specs {
		bins := make([]string, len(platforms))
		// Two links at once: a link is mostly one core's work, and the platforms are independent.
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(2)
		for i, p := range platforms {
			bins[i] = filepath.Join(binDir, spec.kind.Name+"-"+strings.ReplaceAll(p.String(), "/", "-"))
			g.Go(func() error {
				return GoBinary(gctx, b.Root, "./cmd/"+spec.kind.Name, bins[i], b.Meta.Version, p)
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		r := Result{Name: spec.kind.Name, Ref: spec.ref, Path: filepath.Join(b.OutDir, spec.kind.Name+".tar"), Platforms: platforms}
		images := make([]v1.Image, len(platforms))
		for i, p := range platforms {
			if images[i], err = spec.kind.Image(bins[i], p, b.Meta); err != nil {
				return nil, fmt.Errorf("assembling the %s image for %s: %w", spec.kind.Name, p, err)
			}
			size, err := compressedSize(images[i])
			if err != nil {
				return nil, err
			}
			r.Sizes = append(r.Sizes, size)
		}
		idx, err := Index(images, platforms)
		if err != nil {
			return nil, err
		}
		if err := WriteOCIArchive(idx, spec.ref, r.Path, b.Meta.Created); err != nil {
			return nil, fmt.Errorf("writing %s: %w", r.Path, err)
		}
		if r.Digest, err = idx.Digest(); err != nil {
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

// GoBinary builds a static binary of pkg for platform p with nothing in it that differs between
// two builds of one commit (no paths, build id or VCS stamp), and the release stamped in. cgo is
// off, so cross-compiling needs no C toolchain and the binary needs no libc.
func GoBinary(ctx context.Context, root, pkg, out, version string, p v1.Platform) error {
	ldflags := "-s -w -buildid= -X github.com/fleetslice/fleetslice/pkg/version.Version=" + version
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	if p.Variant != "" {
		switch p.Architecture {
		case "arm":
			cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
		case "amd64":
			cmd.Env = append(cmd.Env, "GOAMD64="+p.Variant)
		}
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %v: %s", pkg, p, err, strings.TrimSpace(string(output)))
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
