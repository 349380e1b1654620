// Package image builds fleetslice's container images without a container runtime, a registry or
// any package archive: each image is one static Go binary on an empty base, cross-compiled for
// every platform and gathered into one OCI image index, written as an OCI image-layout tarball.
//
// Builds are reproducible: every timestamp is the commit's, layers hold only the binary, and
// the binaries are built with -trimpath and no build id, so one commit always gives one digest.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUser is the manager's and fleetslice-dns's user and group: distroless's "nonroot", which
// no host account is expected to share.
const NonRootUser = "65532:65532"

// Meta is what every image records about its origin.
type Meta struct {
	// Created stamps the config and every file the build adds; use the commit time.
	Created time.Time
	// Version is the release (git describe) the binaries were built from.
	Version string
	// Revision is the commit hash.
	Revision string
}

func (m Meta) labels(title string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    title,
		"org.opencontainers.image.version":  m.Version,
		"org.opencontainers.image.revision": m.Revision,
		"org.opencontainers.image.source":   "https://github.com/fleetslice/fleetslice",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// Kind is one of fleetslice's images: which command it holds and how it runs.
type Kind struct {
	// Name names the archive (dist/<Name>.tar) and the command (./cmd/<Name>).
	Name string
	// Path is where the binary sits in the image, its entrypoint.
	Path string
	// Title is the image's org.opencontainers.image.title.
	Title string
	// User runs the entrypoint; empty is root.
	User string
}

var (
	// ManagerKind runs as a non-root user: it only talks to API servers.
	ManagerKind = Kind{"manager", "/manager", "fleetslice manager", NonRootUser}
	// AgentKind runs as root, because programming nftables over netlink needs CAP_NET_ADMIN in the
	// node's network namespace (the DaemonSet drops every other capability). The agent's default
	// netlink backend needs no nft program, so the image holds nothing else; its
	// --nftables-backend=nft runs the node's nft and is not meant for this image.
	AgentKind = Kind{"agent", "/agent", "fleetslice node agent", ""}
	// DNSKind (CoreDNS with the clusterset plugin) runs as a non-root user; it listens on an
	// unprivileged port (5353 in config/dns).
	DNSKind = Kind{"fleetslice-dns", "/fleetslice-dns", "fleetslice-dns", NonRootUser}
)

// Image is k's image for one platform: binary (built for that platform) on an empty base.
func (k Kind) Image(binary string, p v1.Platform, m Meta) (v1.Image, error) {
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	bin, err := fileLayer(content, k.Path, m.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     bin,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: m.Created}, CreatedBy: "fleetslice image build: the " + k.Title + " binary"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Created = v1.Time{Time: m.Created}
	cf.Config = v1.Config{
		Entrypoint: []string{k.Path},
		User:       k.User,
		WorkingDir: "/",
		Labels:     m.labels(k.Title),
	}
	return mutate.ConfigFile(img, cf)
}

// Index gathers one image per platform into an OCI image index, each entry carrying its
// platform so a runtime pulls only its own.
func Index(images []v1.Image, platforms []v1.Platform) (v1.ImageIndex, error) {
	if len(images) != len(platforms) || len(images) == 0 {
		return nil, fmt.Errorf("an index needs one image per platform, got %d images for %d platforms", len(images), len(platforms))
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, img := range images {
		p := platforms[i]
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &p},
		})
	}
	return idx, nil
}

// fileLayer holds one executable at path, owned by root, stamped with created.
func fileLayer(content []byte, path string, created time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     path[1:],
		Mode:     0o755,
		Size:     int64(len(content)),
		ModTime:  created.UTC(),
		Format:   tar.FormatPAX,
	}
	if err := w.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := w.Write(content); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func exitDetail(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}
