// Package layout holds tests of the repository's shape: what the runtime may import, and that
// its files and functions stay small enough to read in one sitting.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runtimeDirs hold the code that runs in users' clusters: the controllers, the agent, the API
// types, the binaries that start them, and the DNS plugin.
var runtimeDirs = []string{"controllers", "agent", "api", "cmd/manager", "cmd/agent", "cmd/fleetslice-dns", "dns"}

const (
	maxFileLines = 500
	maxFuncLines = 80
)

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// runtimeFiles returns the runtime's non-test, non-generated Go files, relative to root.
func runtimeFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	for _, dir := range runtimeDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.HasPrefix(d.Name(), "zz_generated") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			out = append(out, rel)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestRuntimeFilesAndFunctionsStaySmall(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	for _, rel := range runtimeFiles(t, root) {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			t.Errorf("%s has %d lines, over %d: split it along what it decides", rel, n, maxFileLines)
		}
		f, err := parser.ParseFile(fset, rel, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s has %d lines, over %d", rel, fn.Name.Name, n, maxFuncLines)
			}
		}
	}
}

// The runtime imports nothing from internal/ (tooling, the lab, benchmarks), so that what runs
// in users' clusters never links the development harness.
func TestRuntimeImportsNothingInternal(t *testing.T) {
	root := repoRoot(t)
	var pkgs []string
	for _, dir := range runtimeDirs {
		pkgs = append(pkgs, "./"+dir+"/...")
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/fleetslice/fleetslice/internal/") {
			t.Errorf("the runtime links %s", p)
		}
	}
}

// decisionPackages decide without client calls (docs/architecture.md): given what was read,
// they return what to write. Reconcilers read, call them and write the difference.
var decisionPackages = []string{
	"controllers/endpointslice/endpoints", "controllers/endpointslice/placement", "controllers/endpointslice/coalesce",
	"controllers/endpointslice/hints", "controllers/endpointslice/selection",
	"controllers/topology",
	"controllers/multicluster/merge", "controllers/multicluster/importplan", "controllers/multicluster/sliceplan",
	"controllers/multicluster/liveness", "controllers/multicluster/locality", "controllers/multicluster/clusterselect",
	"agent/selection", "agent/dataplane/ruleset",
	"dns/records",
}

// clientPackages are how a program talks to an API server or the kernel.
var clientPackages = []string{
	"k8s.io/client-go/", "sigs.k8s.io/controller-runtime/pkg/client", "sigs.k8s.io/controller-runtime/pkg/cache",
	"sigs.k8s.io/knftables", "github.com/google/nftables",
}

func TestDecisionsLinkNoClient(t *testing.T) {
	args := []string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}
	for _, pkg := range decisionPackages {
		args = append(args, "./"+pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			for _, c := range clientPackages {
				if strings.HasPrefix(dep, c) {
					t.Errorf("%s decides, yet links %s", fields[0], dep)
				}
			}
		}
	}
}

// Product tooling (what users run against real clusters, and what a release ships) links
// nothing from the development harness.
func TestToolingLinksNoLab(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./internal/ops/...", "./internal/release/...", "./cmd/kubectl-fleetslice/...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/fleetslice/fleetslice/internal/lab/") {
			t.Errorf("product tooling links %s", p)
		}
	}
}
