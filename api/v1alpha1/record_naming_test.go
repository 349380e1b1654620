package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestRecordName(t *testing.T) {
	long := strings.Repeat("x", 63)
	tests := []struct {
		name              string
		cluster, ns, svc  string
		want              string
		wantHashed        bool
		wantPrefixStarter string
	}{
		{name: "plain", cluster: "east", ns: "default", svc: "web", want: "east.default.web"},
		{name: "cluster id with a dot", cluster: "east.registry1", ns: "shop", svc: "cart", want: "east.registry1.shop.cart"},
		{name: "too long for a subdomain", cluster: long + "." + long + "." + long, ns: long, svc: long, wantHashed: true, wantPrefixStarter: "xxxx"},
		{name: "uppercase cluster id", cluster: "East", ns: "default", svc: "web", wantHashed: true, wantPrefixStarter: "east-default-web"},
		{name: "dot in the service name", cluster: "east", ns: "default", svc: "a.b", wantHashed: true, wantPrefixStarter: "east-default-a-b"},
		{name: "all empty", wantHashed: true, wantPrefixStarter: "record."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RecordName(tc.cluster, tc.ns, tc.svc)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Fatalf("RecordName(%q, %q, %q) = %q is not a DNS-1123 subdomain: %v", tc.cluster, tc.ns, tc.svc, got, errs)
			}
			if got != RecordName(tc.cluster, tc.ns, tc.svc) {
				t.Fatalf("RecordName is not deterministic for %q", got)
			}
			if !tc.wantHashed {
				if got != tc.want {
					t.Fatalf("RecordName(%q, %q, %q) = %q, want %q", tc.cluster, tc.ns, tc.svc, got, tc.want)
				}
				return
			}
			if strings.Count(got, ".") != 1 {
				t.Fatalf("hashed name %q must have exactly two labels", got)
			}
			if !strings.HasPrefix(got, tc.wantPrefixStarter) {
				t.Fatalf("hashed name %q does not start with %q", got, tc.wantPrefixStarter)
			}
		})
	}
}

func TestRecordNameKeepsAmbiguousLookingTriplesApart(t *testing.T) {
	pairs := [][2][3]string{
		{{"a.b", "c", "d"}, {"a", "b", "c-d"}},
		{{"a-b", "c", "d"}, {"a", "b-c", "d"}},
		{{"A", "b", "c"}, {"a", "b", "c"}},
		{{"a", "B", "c"}, {"a", "b", "C"}},
	}
	for _, p := range pairs {
		first := RecordName(p[0][0], p[0][1], p[0][2])
		second := RecordName(p[1][0], p[1][1], p[1][2])
		if first == second {
			t.Errorf("%v and %v share the record name %q", p[0], p[1], first)
		}
	}
}

func TestRecordLabels(t *testing.T) {
	got := RecordLabels("east", "shop", "cart")
	want := map[string]string{
		"multicluster.kubernetes.io/source-cluster": "east",
		"fleetslice.io/service-namespace":           "shop",
		"fleetslice.io/service-name":                "cart",
	}
	if len(got) != len(want) {
		t.Fatalf("RecordLabels = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("RecordLabels[%q] = %q, want %q", k, got[k], v)
		}
	}
}

func FuzzRecordName(f *testing.F) {
	f.Add("east", "default", "web", "west", "default", "web")
	f.Add("a.b", "c", "d", "a", "b", "c-d")
	f.Add("", "", "", "x", "", "")
	f.Add("Ü", "ns", "n", "-", "ns", "n")
	f.Fuzz(func(t *testing.T, c1, n1, s1, c2, n2, s2 string) {
		first := RecordName(c1, n1, s1)
		if errs := validation.IsDNS1123Subdomain(first); len(errs) != 0 {
			t.Fatalf("RecordName(%q, %q, %q) = %q is invalid: %v", c1, n1, s1, first, errs)
		}
		if first != RecordName(c1, n1, s1) {
			t.Fatalf("RecordName(%q, %q, %q) is not deterministic", c1, n1, s1)
		}
		if c1 == c2 && n1 == n2 && s1 == s2 {
			return
		}
		if second := RecordName(c2, n2, s2); first == second {
			t.Fatalf("(%q, %q, %q) and (%q, %q, %q) share the record name %q", c1, n1, s1, c2, n2, s2, first)
		}
	})
}
