package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/parts"
)

// benchOptions are the flags of `fleetslice bench`.
type benchOptions struct {
	all, quick, list bool
	output           string
	figures          string
	binDir           string
}

func newBenchCommand() *cobra.Command {
	o := benchOptions{}
	available := parts.All()
	var names []string
	for _, p := range available {
		names = append(names, p.Name)
	}
	cmd := &cobra.Command{
		Use:   "bench [part...]",
		Short: "Measure fleetslice beside what users would run instead, and write docs/benchmarks.md",
		Long: `bench runs side-by-side benchmarks and prints each part as Markdown: the figures, the machine and
the command. With --output it rewrites those parts' sections of the document (other parts'
sections are kept) and draws the pictures into a "benchmarks" directory next to it.

Parts: ` + strings.Join(names, ", ") + `.

--quick shrinks every part so the whole bench takes a few minutes; its figures are indicative only.`,
		Example: `  fleetslice bench --all --output docs/benchmarks.md
  fleetslice bench endpointslice --quick
  fleetslice bench topology --topology-sample 1000000`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.list {
				for _, p := range available {
					fmt.Fprintf(cmd.OutOrStdout(), "%-16s %s\n", p.Name, p.Title)
				}
				return nil
			}
			chosen, err := choose(available, args, o.all)
			if err != nil {
				return err
			}
			_, err = bench.Run(cmd.Context(), bench.Config{
				Parts: chosen, Order: names, Quick: o.quick, Output: o.output, FigureDir: o.figures,
				Stdout: cmd.OutOrStdout(), Log: cmd.ErrOrStderr(), Invocation: invocation(), BinDir: o.binDir,
			})
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.all, "all", false, "run every part")
	f.BoolVar(&o.quick, "quick", false, "shrink every part so the whole bench takes minutes")
	f.BoolVar(&o.list, "list", false, "list the parts and exit")
	f.StringVar(&o.output, "output", "", "Markdown document whose sections of the run parts are rewritten, e.g. docs/benchmarks.md")
	f.StringVar(&o.binDir, "bin-dir", defaultBinDir(), "directory holding the manager and agent binaries the local-ClusterSet parts start")
	f.StringVar(&o.figures, "figures", "", "directory for pictures (default: benchmarks/ next to --output; none without --output)")
	for _, p := range available {
		if p.Flags != nil {
			p.Flags(f)
		}
	}
	return cmd
}

// choose picks the parts named on the command line, in the document's order.
func choose(available []bench.Part, args []string, all bool) ([]bench.Part, error) {
	if all {
		if len(args) > 0 {
			return nil, fmt.Errorf("--all takes no part names")
		}
		return available, nil
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("name the parts to run or pass --all (see --list)")
	}
	want := map[string]bool{}
	for _, a := range args {
		want[a] = true
	}
	var out []bench.Part
	for _, p := range available {
		if want[p.Name] {
			out = append(out, p)
			delete(want, p.Name)
		}
	}
	for name := range want {
		return nil, fmt.Errorf("unknown part %q (see --list)", name)
	}
	return out, nil
}

// invocation is this process's command line as the document shows it: the binary by its name
// (bin/fleetslice, a temporary build) and the arguments quoted for a shell.
func invocation() string {
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		if i == 0 {
			a = filepath.Base(a)
		}
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args[i] = a
	}
	return strings.Join(args, " ")
}
