package clustersettest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
)

// TestOutsideModuleRunsTheExampleSuite is what a team does: a module of its own that requires
// fleetslice, holds the example suite, and runs it with nothing but KUBEBUILDER_ASSETS pointing at
// etcd and kube-apiserver. HOME is a fresh directory, so the binaries cannot be found any other
// way. The replace directive stands in for a released version.
func TestOutsideModuleRunsTheExampleSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module from scratch")
	}
	assets, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer)
	if err != nil {
		t.Skipf("envtest binaries: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	rootMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(rootMod)

	dir := t.TempDir()
	mod := "module example.com/payments/multicluster-tests\n\n" + string(goLine) + "\n\n" +
		"require github.com/fleetslice/fleetslice v0.0.0\n\n" +
		"replace github.com/fleetslice/fleetslice => " + root + "\n"
	write(t, filepath.Join(dir, "go.mod"), []byte(mod))
	// Our go.sum holds every checksum the example's dependencies need, so nothing is fetched
	// that this repository's own build did not fetch already.
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(dir, "go.sum"))
	examples, err := filepath.Glob(filepath.Join(root, "examples", "clusterset", "*.go"))
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example suite found: %v", err)
	}
	for _, src := range examples {
		copyFile(t, src, filepath.Join(dir, filepath.Base(src)))
	}

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"TMPDIR=" + t.TempDir(),
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"KUBEBUILDER_ASSETS=" + assets,
	}
	// The caches are shared with this build, or the module would compile Kubernetes from scratch.
	for _, key := range []string{"GOCACHE", "GOMODCACHE", "GOPROXY", "GONOSUMDB", "GOSUMDB"} {
		out, err := exec.Command(goBin, "env", key).Output()
		if err != nil {
			t.Fatal(err)
		}
		if v := strings.TrimSpace(string(out)); v != "" {
			env = append(env, key+"="+v)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s in the outside module: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run("vet", "./...")
	out := run("test", "-count=1", "-v", "./...", "-ginkgo.no-color")
	if !strings.Contains(out, "Ran 3 of 3 Specs") || !strings.Contains(out, "SUCCESS!") {
		t.Fatalf("the example suite did not run its three specs:\n%s", out)
	}
	t.Logf("the example suite passed in an outside module:\n%s", lastLines(out, 6))
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dst, data)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
