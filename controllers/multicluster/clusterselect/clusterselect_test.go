package clusterselect

import (
	"reflect"
	"strings"
	"testing"
)

const region = "region.topology.k8s.io"

// story1 is the KEP's first story: the importer's own cluster, then its region, then its
// continent.
const story1 = `[
 {"propertySelector": {"matchExpressions": [{"key": "cluster.clusterset.k8s.io", "operator": "In", "values": ["@SameAsImporter@"]}]}},
 {"propertySelector": {"matchProperties": {"region.topology.k8s.io": "@SameAsImporter@"}}},
 {"propertySelector": {"matchProperties": {"continent.topology.k8s.io": "@SameAsImporter@"}}}
]`

func mustParse(t *testing.T, s string) []Selector {
	t.Helper()
	sel, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(sel); err != nil {
		t.Fatal(err)
	}
	return sel
}

func TestParseAndValidate(t *testing.T) {
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"propertySelector":{"matchProperties":{"a":"b"}}},`, 17), ",") + "]"
	for _, tc := range []struct {
		name, value string
		// wantErr is a part of the message, "" for valid.
		wantErr string
	}{
		{"the KEP's first story", story1, ""},
		{"a literal value and Exists", `[{"propertySelector":{"matchProperties":{"gpu-tier.example.com":"high"},"matchExpressions":[{"key":"gpu-tier.example.com","operator":"Exists"}]}}]`, ""},
		{"values outside label syntax", `[{"propertySelector":{"matchProperties":{"site.example.com":"Paris / rive gauche"}}}]`, ""},
		{"an empty list", `[]`, ""},
		{"not JSON", `region=same`, "not a JSON list"},
		{"an unknown field", `[{"labelSelector":{}}]`, "unknown field"},
		{"two values", `[] []`, "more than one JSON value"},
		{"no propertySelector", `[{}]`, "needs a propertySelector"},
		{"an empty propertySelector", `[{"propertySelector":{}}]`, "needs a propertySelector"},
		{"a key that is no ClusterProperty name", `[{"propertySelector":{"matchProperties":{"topology.kubernetes.io/region":"@SameAsImporter@"}}}]`, "not a ClusterProperty name"},
		{"In without values", `[{"propertySelector":{"matchExpressions":[{"key":"a","operator":"In"}]}}]`, "need at least one value"},
		{"Exists with values", `[{"propertySelector":{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}}]`, "take no values"},
		{"an unknown operator", `[{"propertySelector":{"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]}}]`, "Unsupported value"},
		{"more than 16", many, "must have at most 16 items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := Parse(tc.value)
			if err == nil {
				err = Validate(sel)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestFormatIsCanonical(t *testing.T) {
	a := mustParse(t, `[{"propertySelector":{"matchProperties":{"b":"2","a":"1"},"matchExpressions":[]}}]`)
	b := mustParse(t, `[{"propertySelector":{"matchProperties":{"a":"1","b":"2"}}}]`)
	if !Equal(a, b) || Format(a) != `[{"propertySelector":{"matchProperties":{"a":"1","b":"2"}}}]` {
		t.Fatalf("%s and %s differ", Format(a), Format(b))
	}
	if !Equal(nil, []Selector{}) || Format(nil) != "" {
		t.Fatal("no selectors must format as nothing")
	}
	if again := mustParse(t, Format(a)); !Equal(a, again) {
		t.Fatalf("round trip changed %s into %s", Format(a), Format(again))
	}
	c := mustParse(t, `[{"propertySelector":{"matchProperties":{"a":"1"}}},{"propertySelector":{"matchProperties":{"b":"2"}}}]`)
	d := mustParse(t, `[{"propertySelector":{"matchProperties":{"b":"2"}}},{"propertySelector":{"matchProperties":{"a":"1"}}}]`)
	if Equal(c, d) {
		t.Fatal("the order of the selectors is their meaning")
	}
}

// fleet: two regions with a continent each, and "lost" without a region.
func fleet() []Member {
	return []Member{
		{Name: "eu-1", Properties: map[string]string{region: "eu-west", "continent.topology.k8s.io": "eu"}},
		{Name: "eu-2", Properties: map[string]string{region: "eu-west", "continent.topology.k8s.io": "eu"}},
		{Name: "eu-3", Properties: map[string]string{region: "eu-north", "continent.topology.k8s.io": "eu"}},
		{Name: "us-1", Properties: map[string]string{region: "us-east", "continent.topology.k8s.io": "na"}},
		{Name: "lost", Properties: map[string]string{"continent.topology.k8s.io": "eu"}},
	}
}

func TestEvaluate(t *testing.T) {
	members := fleet()
	byName := map[string]Member{}
	for _, m := range members {
		byName[m.Name] = m
	}
	results := func(clusters ...[]string) []Result {
		out := make([]Result, len(clusters))
		for i, c := range clusters {
			out[i].Clusters = c
		}
		return out
	}
	for _, tc := range []struct {
		name, selectors, importer string
		want                      []Result
	}{
		{"own cluster, region, continent (the KEP's example)", story1, "eu-1",
			results([]string{"eu-1"}, []string{"eu-1", "eu-2"}, []string{"eu-1", "eu-2", "eu-3"})},
		{"an importer in another region", story1, "us-1", results([]string{"us-1"}, []string{"us-1"}, []string{"us-1"})},
		// The importer has no region: that selector selects nothing (KEP); it is itself
		// incomplete, so no selector selects it either.
		{"an importer without the property", story1, "lost", results(nil, nil, []string{"eu-1", "eu-2", "eu-3"})},
		{"a literal value", `[{"propertySelector":{"matchProperties":{"region.topology.k8s.io":"eu-north"}}}]`, "us-1", results([]string{"eu-3"})},
		{"NotIn the importer's region", `[{"propertySelector":{"matchExpressions":[{"key":"region.topology.k8s.io","operator":"NotIn","values":["@SameAsImporter@"]}]}}]`, "eu-1",
			results([]string{"eu-3", "us-1"})},
		{"DoesNotExist selects the cluster without it, when nothing compares its value", `[{"propertySelector":{"matchExpressions":[{"key":"region.topology.k8s.io","operator":"DoesNotExist"}]}}]`, "eu-1",
			results([]string{"lost"})},
		{"requirements are ANDed", `[{"propertySelector":{"matchProperties":{"continent.topology.k8s.io":"@SameAsImporter@"},"matchExpressions":[{"key":"cluster.clusterset.k8s.io","operator":"NotIn","values":["@SameAsImporter@"]}]}}]`, "eu-2",
			results([]string{"eu-1", "eu-3", "lost"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate(mustParse(t, tc.selectors), byName[tc.importer], members)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMissingNamesWhoLacksWhat(t *testing.T) {
	got := Missing(mustParse(t, story1), fleet())
	want := []MissingProperties{{Cluster: "lost", Keys: []string{region}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// The cluster id is every member's own name, published or not.
	if m := Missing(mustParse(t, story1)[:1], []Member{{Name: "bare"}}); m != nil {
		t.Fatalf("a member without properties lacks its id: %v", m)
	}
}

func TestPropertiesAndResultsRoundTrip(t *testing.T) {
	props := map[string]string{region: "eu-west", "b.example.com": "x"}
	got, ok := ParseProperties(FormatProperties(props))
	if !ok || !reflect.DeepEqual(got, props) {
		t.Fatalf("properties: %v %t", got, ok)
	}
	if _, ok := ParseProperties(""); ok {
		t.Fatal("an absent annotation reads as properties")
	}
	res := []Result{{Clusters: []string{"a"}}, {}}
	if s := FormatResults(res); s != `[{"clusters":["a"]},{}]` {
		t.Fatalf("results %s", s)
	}
	back, err := ParseResults(FormatResults(res))
	if err != nil || !reflect.DeepEqual(back, res) {
		t.Fatalf("results round trip: %v %v", back, err)
	}
	if FormatResults(nil) != "[]" {
		t.Fatal("no results must be an empty list")
	}
}
