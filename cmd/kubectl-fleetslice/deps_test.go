package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The plugin is what platform engineers install; the development harness must stay out of it.
// forbidden names the packages that mark the harness, each with why it may not be linked.
var forbidden = []struct {
	prefix, why string
}{
	{"github.com/fleetslice/fleetslice/internal/lab", "the development lab (local ClusterSets, benchmarks, simulators)"},
	{"github.com/fleetslice/fleetslice/test/", "end-to-end test helpers"},
	{"sigs.k8s.io/controller-runtime/pkg/envtest", "envtest starts etcd and kube-apiserver for tests"},
	{"sigs.k8s.io/controller-runtime/pkg/client/fake", "a fake client is a test double"},
	{"sigs.k8s.io/controller-runtime/pkg/client/interceptor", "client interceptors inject faults in tests"},
	{"k8s.io/client-go/kubernetes/fake", "a fake clientset is a test double"},
	{"k8s.io/client-go/testing", "client-go's fake-client machinery"},
	{"gonum.org/", "plotting and numerics of the benchmarks"},
	{"github.com/onsi/", "the Ginkgo/Gomega test frameworks"},
	{"go.uber.org/goleak", "a test leak checker"},
	{"testing", "the standard library's test framework"},
}

// allowedImporters are the only packages that may import a forbidden package, and why. client-go
// keeps the generic typed client (gentype) and its fake in one package, so gentype imports
// client-go/testing: every program using a typed clientset, kubectl included, links it, and
// controller-runtime's client reaches it through its metrics. Any other path to it is ours and
// fails.
var allowedImporters = map[string][]string{
	"k8s.io/client-go/testing": {"k8s.io/client-go/gentype"},
}

func isForbidden(pkg string) (string, bool) {
	if path.Base(pkg) == "fake" {
		return "a fake client is a test double", true
	}
	for _, f := range forbidden {
		// A prefix names a package and everything below it, never a longer name ("testingx").
		if pkg == f.prefix || strings.HasPrefix(pkg, strings.TrimSuffix(f.prefix, "/")+"/") {
			return f.why, true
		}
	}
	return "", false
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	DepOnly    bool
}

// violations walks the import graph from root and returns one line per forbidden package, with
// the shortest chain of imports that brings it in.
func violations(root string, graph map[string][]string) []string {
	parent := map[string]string{root: ""}
	queue := []string{root}
	var out []string
	reported := map[string]bool{}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, dep := range graph[pkg] {
			if why, bad := isForbidden(dep); bad && !reported[dep] && !slices.Contains(allowedImporters[dep], pkg) {
				reported[dep] = true
				chain := []string{dep}
				for p := pkg; p != ""; p = parent[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				out = append(out, dep+" ("+why+"), imported via "+strings.Join(chain, " -> "))
			}
			if _, seen := parent[dep]; !seen {
				parent[dep] = pkg
				queue = append(queue, dep)
			}
		}
	}
	return out
}

func goTool() string {
	if path, err := exec.LookPath("go"); err == nil {
		return path
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// TestLinksNoLab lists what the plugin links, as `go build` would, and fails naming every
// forbidden package and the chain of imports that brings it in.
func TestLinksNoLab(t *testing.T) {
	cmd := exec.Command(goTool(), "list", "-deps", "-json=ImportPath,Imports,DepOnly", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	graph := map[string][]string{}
	root := ""
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		graph[p.ImportPath] = p.Imports
		if !p.DepOnly {
			root = p.ImportPath
		}
	}
	if root == "" || len(graph) < 50 {
		t.Fatalf("go list found %d packages and no main package; the check would prove nothing", len(graph))
	}
	for _, v := range violations(root, graph) {
		t.Errorf("kubectl-fleetslice links %s", v)
	}
}

// TestViolationsNamesTheChain proves the check can fail: a forbidden package reached through an
// ordinary one is reported with its chain, and the one allowed importer is not.
func TestViolationsNamesTheChain(t *testing.T) {
	graph := map[string][]string{
		"main":                     {"example.com/ok", "k8s.io/client-go/gentype"},
		"example.com/ok":           {"github.com/fleetslice/fleetslice/internal/lab/localset", "k8s.io/client-go/testing"},
		"k8s.io/client-go/gentype": {"k8s.io/client-go/testing"},
		"github.com/fleetslice/fleetslice/internal/lab/localset": {"sigs.k8s.io/controller-runtime/pkg/envtest"},
	}
	got := violations("main", graph)
	want := []string{
		"github.com/fleetslice/fleetslice/internal/lab/localset (the development lab (local ClusterSets, benchmarks, simulators)), imported via main -> example.com/ok -> github.com/fleetslice/fleetslice/internal/lab/localset",
		"k8s.io/client-go/testing (client-go's fake-client machinery), imported via main -> example.com/ok -> k8s.io/client-go/testing",
		"sigs.k8s.io/controller-runtime/pkg/envtest (envtest starts etcd and kube-apiserver for tests), imported via main -> example.com/ok -> github.com/fleetslice/fleetslice/internal/lab/localset -> sigs.k8s.io/controller-runtime/pkg/envtest",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n got %q\nwant %q", got, want)
	}
	if _, bad := isForbidden("testingx/other"); bad {
		t.Error("a package that only starts with a forbidden name must not match")
	}
}

// TestBinaryHasNoLabSymbols builds the plugin and reads its symbol table: what the linker kept
// must hold nothing of a forbidden package, with no exception. It backs the one exception
// above: client-go/testing is listed through gentype, but none of it survives linking.
func TestBinaryHasNoLabSymbols(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin")
	}
	bin := filepath.Join(t.TempDir(), "kubectl-fleetslice")
	if out, err := exec.Command(goTool(), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(goTool(), "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	patterns := make([]*regexp.Regexp, 0, len(forbidden)+1)
	for _, f := range forbidden {
		// The package path must start the symbol or follow a non-path character ("*", "[", ","),
		// so "testing" does not match k8s.io/client-go/testing's own symbols twice or a "mytesting".
		patterns = append(patterns, regexp.MustCompile(`(^|[^A-Za-z0-9_./-])`+regexp.QuoteMeta(strings.TrimSuffix(f.prefix, "/"))+`[./]`))
	}
	patterns = append(patterns, regexp.MustCompile(`/fake\.`))
	found := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		sym := strings.Join(fields[2:], " ")
		for _, p := range patterns {
			if p.MatchString(sym) {
				found[p.String()]++
				if found[p.String()] == 1 {
					t.Errorf("the plugin binary holds %s (matched %s)", sym, p)
				}
			}
		}
	}
}
