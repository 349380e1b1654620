package localset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadManifestsPutsNamespacesFirstAndRefusesAnEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadManifests(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no manifests") {
		t.Fatalf("a missing directory must be an error, got %v", err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("kustomization.yaml", "resources:\n- app.yaml\n")
	if _, err := ReadManifests(dir); err == nil {
		t.Fatal("a directory holding only kustomization.yaml has no objects and must be an error")
	}
	write("app.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: demo\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n")
	objs, err := ReadManifests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "Namespace" || objs[1].GetName() != "web" {
		t.Fatalf("want the Namespace then the Service, got %d objects starting with %s", len(objs), objs[0].GetKind())
	}
	write("broken.yaml", "kind: [unclosed\n")
	if _, err := ReadManifests(dir); err == nil || !strings.Contains(err.Error(), "broken.yaml") {
		t.Fatalf("a broken manifest must be named in the error, got %v", err)
	}
}
