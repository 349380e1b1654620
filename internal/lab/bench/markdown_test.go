package bench

import (
	"strings"
	"testing"
)

func section(name, body string) string {
	return "<!-- bench:begin " + name + " -->\n" + body + "\n<!-- bench:end " + name + " -->\n"
}

func TestMergeDocumentReplacesOnlyFreshSections(t *testing.T) {
	old := "# whatever was here\n\n" + section("b", "old b") + "\n" + section("zz", "orphan") + section("a", "old a")
	got := MergeDocument(old, []string{"a", "b", "c"}, map[string]string{"b": section("b", "new b"), "c": section("c", "new c")})
	if !strings.HasPrefix(got, documentHeader) {
		t.Errorf("header not regenerated:\n%s", got)
	}
	if strings.Contains(got, "old b") || strings.Contains(got, "whatever was here") {
		t.Errorf("stale content kept:\n%s", got)
	}
	order := []string{"old a", "new b", "new c", "orphan"}
	last := -1
	for _, want := range order {
		i := strings.Index(got, want)
		if i < 0 {
			t.Fatalf("%q missing:\n%s", want, got)
		}
		if i < last {
			t.Errorf("%q out of order:\n%s", want, got)
		}
		last = i
	}
	if again := MergeDocument(got, []string{"a", "b", "c"}, nil); again != got {
		t.Errorf("merging nothing changed the document:\n%s\nvs\n%s", got, again)
	}
}

func TestMergeDocumentKeepsUnknownFreshSectionsInNameOrder(t *testing.T) {
	got := MergeDocument("", nil, map[string]string{"y": section("y", "Y"), "x": section("x", "X")})
	if strings.Index(got, "X") > strings.Index(got, "Y") || !strings.Contains(got, "Y") {
		t.Errorf("got:\n%s", got)
	}
}

func TestMarkdownEscapesCellsAndMarksFailures(t *testing.T) {
	r := &Result{
		Part: Part{Name: "p", Title: "P"}, Command: "fleetslice bench p",
		Report: &Report{
			Tables: []Table{{Header: []string{"a", "b"}, Rows: [][]string{{"x|y", "multi\nline"}, {"short"}}}},
			Checks: []Check{{Name: "holds"}, {Name: "breaks", Failure: "why"}},
		},
	}
	md := r.Markdown()
	for _, want := range []string{`| x\|y | multi line |`, "| short |  |", "- held: holds", "- **FAILED**: breaks: why", "`fleetslice bench p`"} {
		if !strings.Contains(md, want) {
			t.Errorf("missing %q in\n%s", want, md)
		}
	}
	if got := r.FailedChecks(); len(got) != 1 || got[0].Name != "breaks" {
		t.Errorf("failed checks %v", got)
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Count(0), "0"}, {Count(999), "999"}, {Count(1000), "1,000"}, {Count(-1234567), "-1,234,567"},
		{Bytes(512), "512 B"}, {Bytes(1536), "1.5 KiB"}, {Bytes(3 << 30), "3.0 GiB"},
		{Micros(12.34), "12.3 µs"}, {Micros(16581), "16.58 ms"},
		{Ratio(1, 2), "0.50×"}, {Ratio(30, 2), "15×"}, {Ratio(0, 0), "="}, {Ratio(1, 0), "n/a"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
