package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// WriteOCIArchive writes idx as an OCI image-layout tarball that `docker load`, `podman load` and
// `skopeo copy oci-archive:` accept, tagged ref. The archive's own entries are sorted and stamped
// with mtime, so equal indexes give byte-identical files.
func WriteOCIArchive(idx v1.ImageIndex, ref, path string, mtime time.Time) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	dir, err := os.MkdirTemp("", "fleetslice-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// containerd (docker load) reads the full name; OCI tools read the tag.
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	}))
	if err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := tarDir(dir, out, mtime); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Archive is an archive WriteOCIArchive wrote, read back: its image index and the reference it
// was tagged with. Its blobs are read from a temporary copy that Close removes.
type Archive struct {
	Index v1.ImageIndex
	Ref   string
	dir   string
}

// OpenArchive reads an archive WriteOCIArchive wrote.
func OpenArchive(path string) (a *Archive, err error) {
	dir, err := os.MkdirTemp("", "fleetslice-oci-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := Extract(f, dir); err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", path, err)
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout: %w", path, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 || !im.Manifests[0].MediaType.IsIndex() {
		return nil, fmt.Errorf("%s holds %d entries, want one image index (rebuild it with make docker-build)", path, len(im.Manifests))
	}
	desc := im.Manifests[0]
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return nil, err
	}
	return &Archive{Index: idx, Ref: desc.Annotations["io.containerd.image.name"], dir: dir}, nil
}

// Close removes the archive's temporary copy; images read from it stop working.
func (a *Archive) Close() error { return os.RemoveAll(a.dir) }

// Image returns the archive's image for platform p.
func (a *Archive) Image(p v1.Platform) (v1.Image, error) {
	im, err := a.Index.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, desc := range im.Manifests {
		if desc.Platform != nil && desc.Platform.Equals(p) {
			return a.Index.Image(desc.Digest)
		}
		if desc.Platform != nil {
			have = append(have, desc.Platform.String())
		}
	}
	return nil, fmt.Errorf("%s has no image for %s, only for %s", a.Ref, p, strings.Join(have, ", "))
}

// ReadOCIArchive returns the image of an archive for the platform of the machine running it (the
// one a test can run), with the reference the archive was tagged with. cleanup removes the
// temporary copy the image reads its blobs from.
func ReadOCIArchive(path string) (img v1.Image, ref string, cleanup func(), err error) {
	a, err := OpenArchive(path)
	if err != nil {
		return nil, "", nil, err
	}
	img, err = a.Image(HostPlatform())
	if err != nil {
		a.Close()
		return nil, "", nil, err
	}
	return img, a.Ref, func() { a.Close() }, nil
}

// Unpack writes img's root filesystem (every layer applied, whiteouts honoured) into dir.
func Unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	return Extract(rc, dir)
}

// tarDir writes the tree under dir as a tar stream: paths sorted (WalkDir's lexical order),
// owner root, mode kept, every mtime set to mtime.
func tarDir(dir string, w io.Writer, mtime time.Time) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = mtime.UTC(), time.Time{}, time.Time{}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// Extract unpacks a tar stream into dir: regular files, directories, symbolic and hard links.
// Entries that would land outside dir are refused; devices and the like are skipped (an image's
// root filesystem for a chroot needs none).
func Extract(r io.Reader, dir string) error {
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target, err := within(root, hdr.Name)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(target, tr, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			os.Remove(target)
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			source, err := within(root, hdr.Linkname)
			if err != nil {
				return err
			}
			os.Remove(target)
			if err := os.Link(source, target); err != nil {
				return err
			}
		}
	}
}

func within(root, name string) (string, error) {
	target := filepath.Join(root, filepath.Clean("/"+name))
	if target != root && !strings.HasPrefix(target, root+string(filepath.Separator)) {
		return "", fmt.Errorf("tar entry %q leaves the target directory", name)
	}
	return target, nil
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	os.Remove(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// AddDevNull creates rootfs/dev/null, the one device node a container runtime always provides and
// Go's os/exec opens for a child's missing stdin. Tests that run an image's entrypoint with chroot
// need it.
func AddDevNull(rootfs string) error {
	if err := os.MkdirAll(filepath.Join(rootfs, "dev"), 0o755); err != nil {
		return err
	}
	path := filepath.Join(rootfs, "dev", "null")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return os.Chmod(path, 0o666)
}
