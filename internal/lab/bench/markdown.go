package bench

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Markers delimit each part's section of the document, so a run of some parts rewrites only
// their sections and keeps the others' figures.
const (
	beginMarker = "<!-- bench:begin %s -->"
	endMarker   = "<!-- bench:end %s -->"
)

var sectionPattern = regexp.MustCompile(`(?s)<!-- bench:begin ([a-z0-9-]+) -->\n.*?<!-- bench:end ([a-z0-9-]+) -->\n?`)

// documentHeader opens docs/benchmarks.md.
const documentHeader = `# Benchmarks

Every figure here was measured beside the thing users would run instead, in the same run on the
same machine, by ` + "`fleetslice bench`" + ` (` + "`make bench`" + ` runs every part and rewrites this file). Each
section names the machine and the command that produced it; sections are rewritten one part at a
time, so their dates can differ. Speeds are measured, never asserted: ` + "`make test`" + ` runs every
part in ` + "`--quick`" + ` mode only to keep the bench working and to check the invariants listed under
each part. The whole ` + "`make bench`" + ` took 35 minutes on the 2-core development machine.

| Part | What it compares | Takes (2 cores) |
|---|---|---|
| ` + "`endpointslice`" + ` | fleetslice's reconciler and upstream's (k8s.io/endpointslice as a library) on the same scripted event streams, in process | about 10 min |
| ` + "`endpointslice-e2e`" + ` | one Deployment rollout on a simulated cluster where kube-controller-manager's EndpointSlice controller and fleetslice both write the slices of its Service; memory at 10,000 Pods against a cluster without the upstream controller; 3 rollouts in each of three settings | about 20 min (30 Nodes, memory at 3,000 Pods) |
| ` + "`topology`" + ` | the published topology simulator's whole space (39,273,145 cases) for no hints, upstream's topologycache and fleetslice's allocator | about 12 min |
| ` + "`multicluster`" + ` | propagation of endpoint changes across 3 clusters at 100 and 1,000 exported Services, and withdrawal of a lost cluster | about 6-7 min |
| ` + "`agent`" + ` | the node agent's nftables cold, full and incremental syncs at 1,000 to 10,000 Services, in a throwaway network namespace (the dry-run renderer without root); with ` + "`make kube-proxy`" + ` built, bin/agent beside kube-proxy v1.37.2 at 1,000 × 10, 10,000 × 10 and 5,000 × 50 | about 2 min; 35 min with kube-proxy |
| ` + "`dns`" + ` | fleetslice-dns answering clusterset.local beside CoreDNS's kubernetes plugin answering cluster.local, at 1,000 and 10,000 Services: queries per second, latency, and how soon a new name resolves | about 5-6 min |
| ` + "`datapath`" + ` | real connections on the local ClusterSet's pod network (root): a Pod's readiness to its first answered connection and its not-readiness to the last, from the other cluster through the ClusterSet IP beside its own cluster through the ClusterIP, at 100 and 1,000 exported Services | about 6 min |

Run one part with ` + "`bin/fleetslice bench <part>`" + ` (` + "`--list`" + ` names them, ` + "`--help`" + ` shows each part's
flags), all of them with ` + "`make bench`" + `, or every part shrunk with ` + "`make bench BENCH_FLAGS=--quick`" + `
(under 3 minutes, figures indicative only).
`

// Markdown renders one part's result as its section of the document, markers included.
func (r *Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, beginMarker+"\n", r.Part.Name)
	fmt.Fprintf(&b, "## %s\n\n", r.Part.Title)
	mode := ""
	if r.Quick {
		mode = " Quick mode: shrunk inputs, the figures are indicative only."
	}
	fmt.Fprintf(&b, "Measured %s, took %s.%s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"),
		r.Elapsed.Round(time.Second), mode)
	fmt.Fprintf(&b, "Command: `%s`", r.Command)
	if r.Invocation != "" && r.Invocation != r.Command {
		fmt.Fprintf(&b, " (this run: `%s`)", r.Invocation)
	}
	b.WriteString("\n\n")
	writeTable(&b, r.Machine.Table())
	if r.Report.Intro != "" {
		b.WriteString(strings.TrimSpace(r.Report.Intro) + "\n\n")
	}
	for _, t := range r.Report.Tables {
		writeTable(&b, t)
	}
	for _, f := range r.Report.Figures {
		fmt.Fprintf(&b, "![%s](%s)\n\n", escapeCell(f.Caption), f.Link)
	}
	if len(r.Report.Checks) > 0 {
		b.WriteString("Invariants checked during the run:\n\n")
		for _, c := range r.Report.Checks {
			if c.Passed() {
				fmt.Fprintf(&b, "- held: %s\n", c.Name)
			} else {
				fmt.Fprintf(&b, "- **FAILED**: %s: %s\n", c.Name, c.Failure)
			}
		}
		b.WriteString("\n")
	}
	for _, n := range r.Report.Notes {
		b.WriteString(strings.TrimSpace(n) + "\n\n")
	}
	fmt.Fprintf(&b, endMarker+"\n", r.Part.Name)
	return b.String()
}

func writeTable(b *strings.Builder, t Table) {
	if t.Caption != "" {
		fmt.Fprintf(b, "**%s**\n\n", t.Caption)
	}
	row := func(cells []string) {
		b.WriteString("|")
		for i := range t.Header {
			cell := ""
			if i < len(cells) {
				cell = cells[i]
			}
			b.WriteString(" " + escapeCell(cell) + " |")
		}
		b.WriteString("\n")
	}
	row(t.Header)
	b.WriteString("|")
	for range t.Header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		row(r)
	}
	b.WriteString("\n")
}

func escapeCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// MergeDocument builds the document from the sections of an existing one and freshly rendered
// sections: fresh sections replace old ones of the same part, the rest are kept. Sections follow
// order (the known parts), then any other old sections in their old order.
func MergeDocument(existing string, order []string, fresh map[string]string) string {
	old := map[string]string{}
	var oldOrder []string
	for _, m := range sectionPattern.FindAllStringSubmatch(existing, -1) {
		if m[1] != m[2] {
			continue
		}
		if _, seen := old[m[1]]; !seen {
			oldOrder = append(oldOrder, m[1])
		}
		old[m[1]] = m[0]
	}
	var b strings.Builder
	b.WriteString(documentHeader)
	written := map[string]bool{}
	emit := func(name string) {
		if written[name] {
			return
		}
		section, ok := fresh[name]
		if !ok {
			section, ok = old[name]
		}
		if !ok {
			return
		}
		written[name] = true
		b.WriteString("\n" + strings.TrimRight(section, "\n") + "\n")
	}
	for _, name := range order {
		emit(name)
	}
	for _, name := range oldOrder {
		emit(name)
	}
	// Fresh sections of parts missing from order still belong in the document.
	for _, name := range slices.Sorted(maps.Keys(fresh)) {
		emit(name)
	}
	return b.String()
}
