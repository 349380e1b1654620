package image

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Package is one pinned Debian package of the agent image.
type Package struct {
	Name, Version, SHA256 string
}

// FileName is the package's name in the download cache.
func (p Package) FileName() string {
	return fmt.Sprintf("%s_%s_amd64.deb", p.Name, strings.ReplaceAll(p.Version, ":", "%3a"))
}

// DefaultCacheDir is where downloaded packages are kept between builds: debs/ under
// $FLEETSLICE_CACHE, or under the user's cache directory beside the Kubernetes binaries.
func DefaultCacheDir() string {
	if c := os.Getenv("FLEETSLICE_CACHE"); c != "" {
		return filepath.Join(c, "debs")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "fleetslice", "debs")
}

// ReadLock parses a lock file: comment lines, then "name<TAB>version<TAB>sha256" rows.
func ReadLock(path string) ([]Package, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var pkgs []Package
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || len(fields[2]) != 64 {
			return nil, fmt.Errorf("%s:%d: want \"package version sha256\", got %q", path, n, line)
		}
		pkgs = append(pkgs, Package{Name: fields[0], Version: fields[1], SHA256: fields[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("%s pins no package", path)
	}
	return pkgs, nil
}

// Fetch returns the paths of the pinned packages in cacheDir, downloading missing ones with
// `apt-get download` and refusing any whose content differs from the pin.
func Fetch(pkgs []Package, cacheDir string) ([]string, error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	paths := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		path := filepath.Join(cacheDir, p.FileName())
		if _, err := os.Stat(path); err != nil {
			if err := download(p, cacheDir); err != nil {
				return nil, err
			}
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return nil, err
		}
		if sum != p.SHA256 {
			return nil, fmt.Errorf("%s has SHA-256 %s, the lock pins %s", path, sum, p.SHA256)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func download(p Package, cacheDir string) error {
	tmp, err := os.MkdirTemp(cacheDir, ".download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("apt-get", "download", p.Name+"="+p.Version)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s=%s: %v: %s\n(run apt-get update first; if Debian has since replaced this version, "+
			"rewrite hack/image/agent-packages.lock with `go run ./hack/image lock`)", p.Name, p.Version, err, strings.TrimSpace(string(out)))
	}
	got, err := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if err != nil || len(got) != 1 {
		return fmt.Errorf("apt-get download %s=%s left %d files", p.Name, p.Version, len(got))
	}
	return os.Rename(got[0], filepath.Join(cacheDir, p.FileName()))
}

// Candidates pins the versions apt would install now of the named packages, downloading each
// into cacheDir to record its SHA-256.
func Candidates(names []string, cacheDir string) ([]Package, error) {
	var pkgs []Package
	for _, n := range names {
		out, err := exec.Command("apt-cache", "policy", n).Output()
		if err != nil {
			return nil, fmt.Errorf("apt-cache policy %s: %w", n, exitDetail(err))
		}
		version := ""
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate: "); ok {
				version = v
			}
		}
		if version == "" || version == "(none)" {
			return nil, fmt.Errorf("apt offers no version of %s (run apt-get update)", n)
		}
		p := Package{Name: n, Version: version}
		path := filepath.Join(cacheDir, p.FileName())
		if _, err := os.Stat(path); err != nil {
			if err := os.MkdirAll(cacheDir, 0o755); err != nil {
				return nil, err
			}
			if err := download(p, cacheDir); err != nil {
				return nil, err
			}
		}
		if p.SHA256, err = fileSHA256(path); err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
