// Package names builds Kubernetes object names from arbitrary text.
package names

import "strings"

// DNSLabelPart lowercases s, turns anything outside [a-z0-9] into '-', cuts it to max bytes and
// trims dashes from both ends. Parts joined with '-' or '.' (and a digest) give a valid DNS-1123
// label or subdomain; the result may be "".
func DNSLabelPart(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= max {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}
