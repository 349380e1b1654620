package names

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestRecordName(t *testing.T) {
	long := strings.Repeat("x", 63)
	tests := []struct {
		name             string
		cluster, ns, svc string
		want             string // exact readable name, or the start of a hashed one
		hashed           bool
	}{
		{name: "plain", cluster: "east", ns: "default", svc: "web", want: "east.default.web"},
		{name: "cluster id with a dot", cluster: "east.registry1", ns: "shop", svc: "cart", want: "east.registry1.shop.cart"},
		{name: "too long for a subdomain", cluster: long + "." + long + "." + long, ns: long, svc: long, hashed: true, want: "xxxx"},
		{name: "uppercase cluster id", cluster: "East", ns: "default", svc: "web", hashed: true, want: "east-default-web."},
		{name: "dot in the service name", cluster: "east", ns: "default", svc: "a.b", hashed: true, want: "east.default-a-b-"},
		{name: "all empty", hashed: true, want: "record."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RecordName(tc.cluster, tc.ns, tc.svc)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Fatalf("RecordName(%q, %q, %q) = %q is not a DNS-1123 subdomain: %v", tc.cluster, tc.ns, tc.svc, got, errs)
			}
			if !tc.hashed {
				if got != tc.want {
					t.Fatalf("RecordName(%q, %q, %q) = %q, want %q", tc.cluster, tc.ns, tc.svc, got, tc.want)
				}
				return
			}
			if strings.Count(got, ".") != 1 || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("hashed name %q must be two labels starting with %q", got, tc.want)
			}
		})
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

// TestNamesStayStable pins names computed before the rules moved here: a changed rule would
// orphan what members and brokers already hold under the old names.
func TestNamesStayStable(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{RecordName("east", "shop", "web"), "east.shop.web"},
		{RecordName("East", "default", "web"), "east-default-web.900cb0ce839b1268b5ee"},
		{BrokerCopyName("east", "shop", "web-abc"), "east.shop.web-abc"},
		{BrokerCopyName("east", "shop", "web.abc"), "east.shop-web-abc-8298177b623ab47b9891"},
		{ImportedName("web", "east", "web-abc"), "web-east-306ffcb2db12"},
		{ImportedName("Web.Prod", "east.one", "slice.1"), "web-prod-east-one-7d529f2748dc"},
		{DerivedServiceName("shop", "web"), "derived-s43vmrvr32"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestNamesKeepLookalikesApart lists inputs that a careless join would map to one name.
func TestNamesKeepLookalikesApart(t *testing.T) {
	type rule struct {
		name string
		fn   func(a, b, c string) string
	}
	rules := []rule{
		{"RecordName", RecordName},
		{"ImportedName", ImportedName},
		{"DerivedServiceName", func(a, b, _ string) string { return DerivedServiceName(a, b) }},
	}
	pairs := [][2][3]string{
		{{"a.b", "c", "d"}, {"a", "b", "c-d"}},
		{{"a-b", "c", "d"}, {"a", "b-c", "d"}},
		{{"ab", "c", "d"}, {"a", "bc", "d"}},
		{{"A", "b", "c"}, {"a", "b", "c"}},
		{{"a", "B", "c"}, {"a", "b", "C"}},
		{{"shop", "web", ""}, {"shopw", "eb", ""}},
		{{"shop", "web", ""}, {"web", "shop", ""}},
		{{strings.Repeat("s", 40) + "1", "c", "d"}, {strings.Repeat("s", 40) + "2", "c", "d"}},
	}
	for _, r := range rules {
		for _, p := range pairs {
			x, y := p[0], p[1]
			if r.name == "DerivedServiceName" && x[0] == y[0] && x[1] == y[1] {
				continue
			}
			if first, second := r.fn(x[0], x[1], x[2]), r.fn(y[0], y[1], y[2]); first == second {
				t.Errorf("%s: %q and %q share the name %q", r.name, x, y, first)
			}
		}
	}
}

// TestBrokerNamesStartWithTheOwner: the broker's admission policy lets a member create only
// names that start with "<its id>.", so every record and copy name of a valid id must, at the
// greatest lengths the API allows: a 56-character id, 63-character namespace and Service names,
// 253-character slice names with dots.
func TestBrokerNamesStartWithTheOwner(t *testing.T) {
	longID := strings.Repeat("c", 56)
	longLabel := strings.Repeat("n", 63)
	dotted := strings.Repeat(strings.Repeat("s", 62)+".", 5)[:253]
	for _, id := range []string{"east", longID} {
		for _, got := range []string{
			RecordName(id, "shop", "web"),
			RecordName(id, longLabel, longLabel),
			BrokerCopyName(id, longLabel, longLabel),
			BrokerCopyName(id, longLabel, dotted),
			BrokerCopyName(id, "shop", "-.-"),
		} {
			if !strings.HasPrefix(got, id+".") {
				t.Errorf("%q does not start with its owner %q", got, id+".")
			}
			if errs := validation.IsDNS1123Subdomain(got); len(errs) != 0 {
				t.Errorf("%q: %v", got, errs)
			}
		}
	}
}

// TestImportedNameAtItsLongest: the longest readable parts still leave a DNS-1123 label.
func TestImportedNameAtItsLongest(t *testing.T) {
	got := ImportedName(strings.Repeat("s", 100), strings.Repeat("c", 100), strings.Repeat("n", 300))
	if errs := validation.IsDNS1123Label(got); len(errs) != 0 {
		t.Fatalf("%q (%d bytes): %v", got, len(got), errs)
	}
}

// FuzzNames: every rule gives a name the API accepts for its kind, the same name for the same
// inputs, and distinct names for distinct inputs.
func FuzzNames(f *testing.F) {
	f.Add("east", "default", "web", "west", "default", "web")
	f.Add("a.b", "c", "d", "a", "b", "c-d")
	f.Add("a-b", "c", "d", "a", "b-c", "d")
	f.Add("", "", "", "x", "", "")
	f.Add("Ü", "east.one", "slice.1", "u", "east-one", "slice-1")
	f.Add(strings.Repeat("s", 30), strings.Repeat("c", 20), "n", strings.Repeat("s", 31), strings.Repeat("c", 20), "n")
	f.Fuzz(func(t *testing.T, a1, b1, c1, a2, b2, c2 string) {
		same := a1 == a2 && b1 == b2 && c1 == c2
		check := func(rule string, fn func(a, b, c string) string, valid func(string) []string, same bool) {
			first := fn(a1, b1, c1)
			if errs := valid(first); len(errs) != 0 {
				t.Fatalf("%s(%q, %q, %q) = %q is invalid: %v", rule, a1, b1, c1, first, errs)
			}
			if first != fn(a1, b1, c1) {
				t.Fatalf("%s(%q, %q, %q) is not deterministic", rule, a1, b1, c1)
			}
			if !same && first == fn(a2, b2, c2) {
				t.Fatalf("%s: (%q, %q, %q) and (%q, %q, %q) share %q", rule, a1, b1, c1, a2, b2, c2, first)
			}
		}
		check("RecordName", RecordName, validation.IsDNS1123Subdomain, same)
		check("BrokerCopyName", BrokerCopyName, validation.IsDNS1123Subdomain, same)
		check("ImportedName", ImportedName, validation.IsDNS1123Label, same)
		// Namespaces never contain '/', which is what keeps derived names apart.
		if strings.Contains(a1, "/") || strings.Contains(a2, "/") {
			return
		}
		check("DerivedServiceName", func(a, b, _ string) string { return DerivedServiceName(a, b) },
			validation.IsDNS1035Label, a1 == a2 && b1 == b2)
	})
}

func TestImportOfDerived(t *testing.T) {
	derived := DerivedServiceName("shop", "web")
	for _, tc := range []struct {
		desc, namespace, service, label, want string
	}{
		{"the import's derived Service", "shop", derived, "web", "web"},
		{"no label", "shop", derived, "", ""},
		{"a label naming another import", "shop", derived, "cart", ""},
		{"the derived name of another namespace", "other", derived, "web", ""},
		{"a user's Service labelled as if derived", "shop", "web", "web", ""},
	} {
		got, ok := ImportOfDerived(tc.namespace, tc.service, tc.label)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: ImportOfDerived(%q, %q, %q) = %q, %v; want %q", tc.desc, tc.namespace, tc.service, tc.label, got, ok, tc.want)
		}
	}
}
