package testutil

import (
	"fmt"
	"strings"
)

// FirstDifference names the first line where got and want differ, for failure messages about
// long texts (rulesets, listings).
func FirstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n- %.300s\n+ %.300s", i+1, gl, wl)
		}
	}
	return "identical"
}
