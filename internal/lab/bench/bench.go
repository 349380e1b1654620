// Package bench is the frame of `fleetslice bench`: each part measures fleetslice beside what a
// user would run instead, in the same process or on the same machine, and returns Markdown-ready
// tables, pictures and the invariants it verified on the way. The runner adds the machine and the
// command, prints every part, and rewrites that part's section of docs/benchmarks.md.
//
// A part is one Part value whose Run function does the measuring; the list of parts lives in
// internal/lab/bench/parts. A part that is not implemented is simply not listed: nothing here prints
// placeholder figures.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
)

// Part is one benchmark `fleetslice bench <name>` runs.
type Part struct {
	// Name is the command-line name and the key of the part's section in the document.
	Name string
	// Title heads the part's section.
	Title string
	// Flags, when set, registers the part's own flags (prefixed with its name) on the command.
	Flags func(*pflag.FlagSet)
	// Run measures. With env.Quick it must finish in well under a minute on two busy cores;
	// errors mean the part could not produce figures at all, while broken invariants go into
	// Report.Checks so the figures can still be read.
	Run func(ctx context.Context, env Env) (*Report, error)
}

// Env is what the runner hands every part.
type Env struct {
	// Quick shrinks the part so the whole bench finishes in minutes; the figures are then
	// indicative only.
	Quick bool
	// FigureDir is the directory pictures go to; empty means the run draws no pictures.
	FigureDir string
	// FigureLink is how the document refers to FigureDir (relative to the document).
	FigureLink string
	// Log receives progress lines; never nil.
	Log io.Writer
	// BinDir holds the fleetslice binaries (manager, agent) that parts running a local
	// ClusterSet start as their own processes.
	BinDir string
}

// Binary is the path of a fleetslice binary in BinDir, or an error saying it must be built.
func (e Env) Binary(name string) (string, error) {
	path := filepath.Join(e.BinDir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("the %s binary is needed (make build): %w", name, err)
	}
	return path, nil
}

// Figure returns where a picture named file should be written and how the document links it;
// ok is false when this run draws no pictures.
func (e Env) Figure(file string) (path, link string, ok bool) {
	if e.FigureDir == "" {
		return "", "", false
	}
	return filepath.Join(e.FigureDir, file), filepath.ToSlash(filepath.Join(e.FigureLink, file)), true
}

// Phase timeouts of the parts that wait on a local ClusterSet: a phase of the full run may take
// minutes on a loaded machine, while a quick run that stalls should fail while its logs are fresh.
const (
	fullPhaseTimeout  = 15 * time.Minute
	quickPhaseTimeout = 3 * time.Minute
)

// PhaseTimeout is flagValue when set (non-zero), else the default for this run's size.
func (e Env) PhaseTimeout(flagValue time.Duration) time.Duration {
	switch {
	case flagValue > 0:
		return flagValue
	case e.Quick:
		return quickPhaseTimeout
	default:
		return fullPhaseTimeout
	}
}

// PhaseTimeoutHelp describes PhaseTimeout's defaults in a flag's help text.
var PhaseTimeoutHelp = fmt.Sprintf("(default %s, %s with --quick)", fullPhaseTimeout, quickPhaseTimeout)

// Logf writes one progress line.
func (e Env) Logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, format+"\n", args...)
	}
}

// Report is what a part measured.
type Report struct {
	// Intro says what was measured and how, in Markdown.
	Intro string
	// Tables are rendered in order.
	Tables []Table
	// Figures are pictures the part wrote through Env.Figure.
	Figures []Figure
	// Checks are the invariants the part verified while measuring.
	Checks []Check
	// Notes are caveats, one Markdown paragraph each.
	Notes []string
}

// Table is one Markdown table.
type Table struct {
	Caption string
	Header  []string
	Rows    [][]string
}

// Figure is one picture in the document.
type Figure struct {
	// Path is where the picture was written; Link is how the document refers to it.
	Path, Link string
	Caption    string
}

// Check is one invariant a part verified; an empty Failure means it held.
type Check struct {
	Name    string
	Failure string
}

// Passed reports whether the invariant held.
func (c Check) Passed() bool { return c.Failure == "" }

// Result is one part's run as the runner saw it.
type Result struct {
	Part    Part
	Report  *Report
	Machine Machine
	// Command reproduces this part alone; Invocation is the command line that ran it.
	Command, Invocation string
	Quick               bool
	Started             time.Time
	Elapsed             time.Duration
}

// FailedChecks lists the checks of r that did not hold.
func (r *Result) FailedChecks() []Check {
	var out []Check
	for _, c := range r.Report.Checks {
		if !c.Passed() {
			out = append(out, c)
		}
	}
	return out
}
