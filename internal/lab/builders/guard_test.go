package builders_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The test builders and the Endpoint comparison each exist once because copies drift: four
// importedSlice helpers had four signatures, and two Endpoint comparisons disagreed on a
// targetRef's resourceVersion. These tests read every Go file of the module and fail when a
// copy comes back, naming where.

// retiredHelpers are the names the duplicated test helpers went by. A test that defines one
// again is writing its own builder; it should use this package (extend it if a method is
// missing). Only _test.go files are checked: a bench or runtime function may need the name for
// something else (agentbench's createService turns a dataplane model into API objects).
var retiredHelpers = []string{"importedSlice", "createService", "node"}

// endpointComparisonHome is the one package allowed to compare Endpoints (EndpointsEqual) and
// their hints (HintsEqual).
const endpointComparisonHome = "controllers/endpointslice/endpoints"

// allowed are findings judged not to be copies, by "path: function", each with its reason.
var allowed = map[string]string{
	// Checks that Plan did not modify or alias its input: exact equality (unset and empty hints
	// differ), which is stricter than HintsEqual on purpose.
	"controllers/endpointslice/placement/invariants_test.go: sameHints": "input-mutation check",
}

func TestNoCopiesOfTheBuilders(t *testing.T) {
	root := moduleRoot(t)
	owned := ownedNames(t, filepath.Join(root, "internal", "lab", "builders"))
	if len(owned) < 8 {
		t.Fatalf("found only %v in the builders package: the scan is broken", owned)
	}
	findings, err := scan(root, owned)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
}

// The checker must be able to fail: it is run on a made-up module holding one of each kind
// of copy, and must report every one and nothing in the files that do things right.
func TestTheGuardCatchesCopies(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("a/helpers_test.go", `package a
import (
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)
func importedSlice(ns string) *discovery.EndpointSlice { return nil }
func createService(ns, name string) *corev1.Service { return nil }
func MakeService(ns, name string) *corev1.Service { return nil }
func sameEndpoint(a, b discovery.Endpoint) bool { return true }
func sameHints(a, b *discovery.EndpointHints) bool { return true }
`)
	write("b/equal.go", `package b
import "k8s.io/api/discovery/v1"
func endpointsEqual(a, b *v1.Endpoint) bool { return true }
`)
	// Fine: a method, a runtime function with a retired name, a comparison of one endpoint
	// with something else, and the home package's own comparison.
	write("c/fine.go", `package c
import discoveryv1 "k8s.io/api/discovery/v1"
type w struct{}
func (w) MakeService() {}
func createService() {}
func hasAddress(e discoveryv1.Endpoint, addr string) bool { return false }
`)
	write(endpointComparisonHome+"/equal.go", `package endpoints
import discoveryv1 "k8s.io/api/discovery/v1"
func EndpointsEqual(a, b discoveryv1.Endpoint) bool { return true }
`)
	findings, err := scan(dir, []string{"MakeService"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a/helpers_test.go: importedSlice",
		"a/helpers_test.go: createService",
		"a/helpers_test.go: MakeService",
		"a/helpers_test.go: sameEndpoint",
		"a/helpers_test.go: sameHints",
		"b/equal.go: endpointsEqual",
	}
	if len(findings) != len(want) {
		t.Errorf("got %d findings, want %d:\n%s", len(findings), len(want), strings.Join(findings, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(findings, func(f string) bool { return strings.HasPrefix(f, w+" ") }) {
			t.Errorf("missed %q in:\n%s", w, strings.Join(findings, "\n"))
		}
	}
}

// scan returns one line per copy found under root: a function named like a builder of this
// package (owned), a retired helper defined in a test, or an Endpoint or hints comparison
// outside endpointComparisonHome.
func scan(root string, owned []string) ([]string, error) {
	var findings []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "vendor" || name == "testdata" || name == "node_modules" ||
				rel == "internal/lab/builders") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		isTest := strings.HasSuffix(path, "_test.go")
		home := filepath.ToSlash(filepath.Dir(rel)) == endpointComparisonHome
		discovery := importNames(file, "k8s.io/api/discovery/v1")
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			name := fn.Name.Name
			var why string
			switch {
			case slices.Contains(owned, name):
				why = "defines a builder this package owns: use builders." + name
			case isTest && slices.Contains(retiredHelpers, name):
				why = "brings back a duplicated test helper: build the object with internal/lab/builders"
			case !home && comparesTwo(fn.Type, discovery, "Endpoint", "EndpointHints"):
				why = "compares Endpoints itself: use endpoints.EndpointsEqual and endpoints.HintsEqual"
			default:
				continue
			}
			key := rel + ": " + name
			if _, ok := allowed[key]; ok {
				continue
			}
			findings = append(findings, fmt.Sprintf("%s (line %d) %s", key, fset.Position(fn.Pos()).Line, why))
		}
		return nil
	})
	return findings, err
}

// comparesTwo reports whether ft is func(a, b T) bool with T one of the named types of the
// discovery package (by value or pointer).
func comparesTwo(ft *ast.FuncType, pkgNames []string, types ...string) bool {
	if len(pkgNames) == 0 || ft.Results == nil || len(ft.Results.List) != 1 || len(ft.Results.List[0].Names) > 1 {
		return false
	}
	if id, ok := ft.Results.List[0].Type.(*ast.Ident); !ok || id.Name != "bool" {
		return false
	}
	var params []ast.Expr
	for _, field := range ft.Params.List {
		for range max(len(field.Names), 1) {
			params = append(params, field.Type)
		}
	}
	if len(params) != 2 {
		return false
	}
	a, b := typeName(params[0], pkgNames), typeName(params[1], pkgNames)
	return a != "" && a == b && slices.Contains(types, a)
}

// typeName returns Sel for pkg.Sel or *pkg.Sel when pkg is one of pkgNames, else "".
func typeName(e ast.Expr, pkgNames []string) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(pkgNames, x.Name) {
		return sel.Sel.Name
	}
	return ""
}

// importNames returns the names file refers to the package path by.
func importNames(file *ast.File, path string) []string {
	var out []string
	for _, imp := range file.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != path {
			continue
		}
		if imp.Name != nil {
			out = append(out, imp.Name.Name)
		} else {
			out = append(out, filepath.Base(path))
		}
	}
	return out
}

// ownedNames returns the Make functions the builders package defines.
func ownedNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Make") {
				out = append(out, fn.Name.Name)
			}
		}
	}
	return out
}

// moduleRoot walks up from this package's directory to the go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
