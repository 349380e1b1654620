package agent

import (
	"strings"
	"testing"
)

func TestResolveClusterID(t *testing.T) {
	tests := []struct {
		name         string
		property     string
		exists       bool
		configured   string
		want         string
		source       ClusterIDSource
		warningAbout string
	}{
		{name: "property only", property: "east", exists: true, want: "east", source: FromClusterProperty},
		{name: "property and the same flag", property: "east", exists: true, configured: "east", want: "east", source: FromClusterProperty},
		{name: "property wins over a different flag", property: "east", exists: true, configured: "west", want: "east", source: FromClusterProperty, warningAbout: "differs"},
		{name: "no property: the flag", configured: "west", want: "west", source: FromOptions},
		{name: "an invalid property falls back to the flag", property: "East_1", exists: true, configured: "west", want: "west", source: FromOptions, warningAbout: "DNS-1123"},
		{name: "an empty property without a flag is no id", property: "", exists: true, source: NoClusterID, warningAbout: "empty"},
		{name: "neither", source: NoClusterID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ResolveClusterID(tc.property, tc.exists, tc.configured)
			if got.ID != tc.want || got.Source != tc.source {
				t.Fatalf("ResolveClusterID = %+v, want id %q from %s", got, tc.want, tc.source)
			}
			if (tc.warningAbout == "") != (got.Warning == "") || !strings.Contains(got.Warning, tc.warningAbout) {
				t.Fatalf("warning %q, want one about %q", got.Warning, tc.warningAbout)
			}
		})
	}
}
