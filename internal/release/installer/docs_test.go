package installer

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The tests in this package run docs/install.md's commands as a user would paste them; these
// helpers read them out of the document, so a changed command changes what the tests run.

// docSection returns the text under the level-2 heading of docs/install.md that starts with
// heading, up to the next level-2 heading.
func docSection(t *testing.T, root, heading string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "\n## "+heading)
	if start < 0 {
		t.Fatalf("docs/install.md has no section %q", heading)
	}
	rest := text[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		rest = rest[:end+3]
	}
	return rest
}

var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// shellCommands returns the commands of every ```sh block of a section, one slice per block:
// continuation lines joined, comments and blank lines dropped.
func shellCommands(section string) [][]string {
	var blocks [][]string
	for _, m := range shBlock.FindAllStringSubmatch(section, -1) {
		var cmds []string
		joined := strings.ReplaceAll(m[1], "\\\n", " ")
		for _, line := range strings.Split(joined, "\n") {
			if i := strings.Index(line, " # "); i >= 0 {
				line = line[:i]
			}
			line = strings.Join(strings.Fields(line), " ")
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			cmds = append(cmds, line)
		}
		blocks = append(blocks, cmds)
	}
	return blocks
}

// withPrefix returns the commands that start with prefix.
func withPrefix(cmds []string, prefix string) []string {
	var out []string
	for _, c := range cmds {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

func TestShellCommands(t *testing.T) {
	section := "## Title\n\ntext\n\n```sh\nmake a b \\\n  X=1   # why\n# a comment\n\nkubectl apply -f x\n```\n\n```yaml\nno: 1\n```\n\n```sh\nhelm x\n```\n"
	got := shellCommands(section)
	want := [][]string{{"make a b X=1", "kubectl apply -f x"}, {"helm x"}}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("block %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

// TestReadmeInstallsAsTheDocs keeps the README's short install in step with docs/install.md's,
// which TestDocumentedImageCommands runs.
func TestReadmeInstallsAsTheDocs(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := shellCommands(docSection(t, root, "On an existing cluster"))[0]
	text := string(data)
	start := strings.Index(text, "\n## Installing on a real cluster")
	if start < 0 {
		t.Fatal("README.md has no section Installing on a real cluster")
	}
	blocks := shellCommands(text[start:])
	if len(blocks) == 0 {
		t.Fatal("README.md's install section has no commands")
	}
	for _, c := range docs {
		if !slices.Contains(blocks[0], c) {
			t.Errorf("README.md's install lacks docs/install.md's %q", c)
		}
	}
	for _, c := range blocks[0] {
		if strings.HasPrefix(c, "make ") && !slices.Contains(docs, c) {
			t.Errorf("README.md runs %q, which docs/install.md does not", c)
		}
	}
}
