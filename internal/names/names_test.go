package names

import "testing"

func TestDNSLabelPart(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"Web.Prod", 63, "web-prod"},
		{"--a_b--", 63, "a-b"},
		{"abcdef", 3, "abc"},
		{"ab-cdef", 3, "ab"},
		{"ÄÖ", 63, ""},
		{"", 10, ""},
	}
	for _, tc := range cases {
		if got := DNSLabelPart(tc.in, tc.max); got != tc.want {
			t.Errorf("DNSLabelPart(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
