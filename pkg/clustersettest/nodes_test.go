package clustersettest

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestNodeNamesFitTheHostnameLabel: a Node's name is its kubernetes.io/hostname label value,
// so it must fit 63 bytes even for a cluster id of the greatest length (56 characters).
func TestNodeNamesFitTheHostnameLabel(t *testing.T) {
	longID := strings.Repeat("c", 56)
	if got := nodeName("east", "zone-a", 0); got != "east-zone-a-0" {
		t.Fatalf("short names stay readable: got %q", got)
	}
	seen := map[string]bool{}
	for _, member := range []string{"east", longID, longID[:55] + "d"} {
		for _, zone := range []string{"zone-a", "zone-b", "europe-west-1"} {
			for n := range 12 {
				name := nodeName(member, zone, n)
				if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
					t.Fatalf("%q: %v", name, errs)
				}
				if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
					t.Fatalf("%q: %v", name, errs)
				}
				if seen[name] {
					t.Fatalf("%q named twice", name)
				}
				seen[name] = true
				if nodeName(member, zone, n) != name {
					t.Fatalf("%q is not stable", name)
				}
			}
		}
	}
}
