package build

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/caddy/caddyfile"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestEveryLinkedPluginIsOrdered fails when a plugin is linked in (directly or by another
// plugin) without a place in Directives: a Corefile naming it would be refused.
func TestEveryLinkedPluginIsOrdered(t *testing.T) {
	var linked []string
	for _, p := range caddy.ListPlugins()["others"] {
		if name, ok := strings.CutPrefix(p, "dns."); ok {
			linked = append(linked, name)
		}
	}
	if !slices.Contains(linked, "clusterset") {
		t.Fatalf("clusterset is not linked in: %v", linked)
	}
	for _, name := range linked {
		if !slices.Contains(Directives, name) {
			t.Errorf("plugin %s is linked in but has no place in Directives", name)
		}
	}
	for _, name := range Directives {
		if !slices.Contains(linked, name) {
			t.Errorf("directive %s has no plugin linked in", name)
		}
	}
	if slices.Index(Directives, "clusterset") > slices.Index(Directives, "forward") {
		t.Error("clusterset must come before forward, or forward would answer clusterset names")
	}
}

// TestShippedCorefileParses keeps config/dns's Corefile within what fleetslice-dns links in.
func TestShippedCorefileParses(t *testing.T) {
	raw, err := os.ReadFile("../../config/dns/corefile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	blocks, err := caddyfile.Parse("Corefile", strings.NewReader(cm.Data["Corefile"]), Directives)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || len(blocks[0].Tokens["clusterset"]) == 0 {
		t.Fatalf("want one server block using clusterset, got %+v", blocks)
	}
}
