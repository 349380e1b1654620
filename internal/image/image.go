// Package image builds fleetslice's container images without a container runtime or a network
// registry: go-containerregistry assembles them from the static binaries (and, for the agent,
// the Debian packages that make up nft), and writes them as OCI image-layout tarballs.
//
// Builds are reproducible: every timestamp is the commit's, layers hold only fixed inputs, and
// the binaries are built with -trimpath and no build id, so one commit always gives one digest.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRootUser is the manager's user and group: distroless's "nonroot", which no host account
// is expected to share.
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

// Manager is the manager image: its static binary on an empty base, run as a non-root user.
func Manager(binary string, m Meta) (v1.Image, error) {
	return static(binary, "/manager", "fleetslice manager", m)
}

// DNS is fleetslice-dns (CoreDNS with the clusterset plugin): its static binary on an empty base,
// run as a non-root user; it listens on an unprivileged port (5353 in config/dns).
func DNS(binary string, m Meta) (v1.Image, error) {
	return static(binary, "/fleetslice-dns", "fleetslice-dns", m)
}

func static(binary, path, title string, m Meta) (v1.Image, error) {
	bin, err := binaryLayer(binary, path, m.Created)
	if err != nil {
		return nil, err
	}
	return assemble([]layer{{bin, "the " + title + " binary"}}, v1.Config{
		Entrypoint: []string{path},
		User:       NonRootUser,
		WorkingDir: "/",
		Labels:     m.labels(title),
	}, m.Created)
}

// Agent is the node agent image: its static binary plus one layer per Debian package of nft
// (debs, in order), run as root because programming nftables needs CAP_NET_ADMIN in the node's
// network namespace. knftables finds nft through PATH.
func Agent(binary string, debs []string, m Meta) (v1.Image, error) {
	var layers []layer
	for _, deb := range debs {
		l, err := debLayer(deb)
		if err != nil {
			return nil, err
		}
		layers = append(layers, layer{l, "Debian package " + filepath.Base(deb)})
	}
	bin, err := binaryLayer(binary, "/agent", m.Created)
	if err != nil {
		return nil, err
	}
	layers = append(layers, layer{bin, "the agent binary"})
	return assemble(layers, v1.Config{
		Entrypoint: []string{"/agent"},
		Env:        []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir: "/",
		Labels:     m.labels("fleetslice node agent"),
	}, m.Created)
}

type layer struct {
	v1.Layer
	createdBy string
}

func assemble(layers []layer, cfg v1.Config, created time.Time) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     l.Layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: created}, CreatedBy: "fleetslice image build: " + l.createdBy},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: created}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// binaryLayer holds one executable at path, owned by root, stamped with created.
func binaryLayer(binary, path string, created time.Time) (v1.Layer, error) {
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
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

// debLayer is a Debian package's file tree as dpkg would unpack it: dpkg-deb's own tar of the
// package's data, untouched, so the layer is exactly the package's pinned content.
func debLayer(deb string) (v1.Layer, error) {
	data, err := exec.Command("dpkg-deb", "--fsys-tarfile", deb).Output()
	if err != nil {
		return nil, fmt.Errorf("reading the files of %s with dpkg-deb: %w", deb, exitDetail(err))
	}
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
