package bench

import (
	"strings"
	"testing"
)

// FuzzMergeDocument: whatever the old document holds, every fresh section lands exactly once,
// and merging the result again without fresh sections changes nothing.
func FuzzMergeDocument(f *testing.F) {
	f.Add("", "fresh a")
	f.Add("# Benchmarks\n"+section("a", "old a")+section("b", "old b"), "fresh a")
	f.Add(section("a", "x")+section("a", "duplicate"), "y")
	f.Add("<!-- bench:begin a -->\nunterminated", "z")
	f.Add("<!-- bench:begin a -->\n<!-- bench:begin b -->\nb\n<!-- bench:end b -->\n", "nested")
	f.Fuzz(func(t *testing.T, existing, body string) {
		if strings.Contains(body, "<!--") {
			return // section bodies are rendered by Markdown(), which never emits markers
		}
		fresh := section("a", body)
		got := MergeDocument(existing, []string{"a", "b"}, map[string]string{"a": fresh})
		if n := strings.Count(got, strings.TrimRight(fresh, "\n")); n != 1 {
			t.Fatalf("fresh section appears %d times in\n%s", n, got)
		}
		if again := MergeDocument(got, []string{"a", "b"}, nil); again != got {
			t.Fatalf("not stable:\n%q\nvs\n%q", got, again)
		}
	})
}
