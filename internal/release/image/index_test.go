package image

import (
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// fakeIndex assembles an index of kind from one small file per platform whose content names the
// platform, so each image can be told apart from the others.
func fakeIndex(t *testing.T, kind Kind, platforms []v1.Platform) v1.ImageIndex {
	t.Helper()
	meta := Meta{Created: time.Unix(1700000000, 0).UTC(), Version: "v-test", Revision: "abc"}
	var images []v1.Image
	for _, p := range platforms {
		bin := filepath.Join(t.TempDir(), "bin")
		if err := os.WriteFile(bin, []byte("binary for "+p.String()), 0o755); err != nil {
			t.Fatal(err)
		}
		img, err := kind.Image(bin, p, meta)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	idx, err := Index(images, platforms)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestIndexArchiveHoldsEveryPlatform writes an index to an archive and reads each platform's
// image back: its config names the platform, its only file is that platform's binary, and a
// platform the index lacks is an error rather than another platform's image.
func TestIndexArchiveHoldsEveryPlatform(t *testing.T) {
	platforms, err := ParsePlatforms(DefaultPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	idx := fakeIndex(t, AgentKind, platforms)
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.tar")
	mtime := time.Unix(1700000000, 0)
	if err := WriteOCIArchive(idx, "registry.example/fs/agent:v1", path, mtime); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "again.tar")
	if err := WriteOCIArchive(fakeIndex(t, AgentKind, platforms), "registry.example/fs/agent:v1", again, mtime); err != nil {
		t.Fatal(err)
	}
	a1, _ := os.ReadFile(path)
	a2, _ := os.ReadFile(again)
	if !bytes.Equal(a1, a2) {
		t.Error("two archives of equal inputs differ byte for byte")
	}

	a, err := OpenArchive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Ref != "registry.example/fs/agent:v1" {
		t.Errorf("archive tagged %q", a.Ref)
	}
	for _, p := range platforms {
		img, err := a.Image(p)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			t.Errorf("the %s image's config says %s/%s", p, cf.OS, cf.Architecture)
		}
		if cf.Config.User != "" || !slices.Equal(cf.Config.Entrypoint, []string{"/agent"}) {
			t.Errorf("the %s image runs %v as %q, want /agent as root", p, cf.Config.Entrypoint, cf.Config.User)
		}
		rootfs := t.TempDir()
		if err := Unpack(img, rootfs); err != nil {
			t.Fatal(err)
		}
		content, err := os.ReadFile(filepath.Join(rootfs, "agent"))
		if err != nil || string(content) != "binary for "+p.String() {
			t.Errorf("the %s image's /agent holds %q (%v)", p, content, err)
		}
	}
	if _, err := a.Image(v1.Platform{OS: "linux", Architecture: "s390x"}); err == nil || !strings.Contains(err.Error(), "linux/amd64, linux/arm64") {
		t.Errorf("asking for a platform the index lacks: %v", err)
	}
}

// TestPushRecordsWhatTheRegistryServes pushes an archive to a registry on loopback and checks
// the digest Push returns is the index the registry serves, with both platforms.
func TestPushRecordsWhatTheRegistryServes(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	platforms, err := ParsePlatforms(DefaultPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	idx := fakeIndex(t, ManagerKind, platforms)
	path := filepath.Join(t.TempDir(), "manager.tar")
	ref := u.Host + "/fleetslice/manager:v1"
	if err := WriteOCIArchive(idx, ref, path, time.Unix(1700000000, 0)); err != nil {
		t.Fatal(err)
	}
	gotRef, digest, err := Push(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if gotRef != ref || digest != want {
		t.Errorf("Push = %s, %s; want %s, %s", gotRef, digest, ref, want)
	}
	pinned, err := name.NewDigest(Pushed{gotRef: digest.String()}.Pin(ref))
	if err != nil {
		t.Fatal(err)
	}
	served, err := remote.Index(pinned)
	if err != nil {
		t.Fatal(err)
	}
	im, err := served.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, m := range im.Manifests {
		if _, err := served.Image(m.Digest); err != nil {
			t.Errorf("the registry lacks the %s image: %v", m.Platform, err)
		}
		have = append(have, m.Platform.String())
	}
	if !slices.Equal(have, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the pushed index holds %v", have)
	}
}
