package statusview

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Render writes every cluster's view as aligned tables.
func Render(w io.Writer, clusters []Cluster) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, c := range clusters {
		fmt.Fprintf(tw, "== %s\n", c.Name)
		if c.Err != nil {
			fmt.Fprintf(tw, "  unreachable: %v\n\n", c.Err)
			continue
		}
		if len(c.Zones) > 0 {
			fmt.Fprintln(tw, "  ZONE\tNODES (READY)\tCPU\tRUNNING PODS")
			for _, z := range c.Zones {
				fmt.Fprintf(tw, "  %s\t%d (%d)\t%d\t%d\n", z.Name, z.Nodes, z.ReadyNodes, z.MilliCPU/1000, z.RunningPods)
			}
		}
		if len(c.Services) > 0 {
			fmt.Fprintln(tw, "  SERVICE\tENDPOINTS (READY)\tSLICES\tBY ZONE\tHINTS\tMANAGED BY")
			for _, s := range c.Services {
				hints := counts(s.PerHint)
				if s.Unhinted > 0 && len(s.PerHint) > 0 {
					hints += fmt.Sprintf(" (+%d unhinted)", s.Unhinted)
				}
				fmt.Fprintf(tw, "  %s/%s\t%d (%d)\t%d\t%s\t%s\t%s\n", s.Namespace, s.Name, s.Endpoints, s.Ready,
					s.Slices, counts(s.PerZone), hints, counts(s.ManagedBy))
			}
		}
		if len(c.Imports) > 0 {
			renderImports(tw, c.Imports)
		}
		if len(c.Agents) > 0 {
			fmt.Fprintln(tw, "  AGENT NODE\tENDPOINTS IT SENDS EACH SERVICE PORT TO")
			for _, a := range c.Agents {
				fmt.Fprintf(tw, "  %s\t%s\n", a.Node, a.summary())
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func renderImports(w io.Writer, imports []Import) {
	dns := slices.ContainsFunc(imports, func(i Import) bool { return i.Resolves != "" })
	traffic := slices.ContainsFunc(imports, func(i Import) bool { return i.Traffic != "" })
	observed := slices.ContainsFunc(imports, func(i Import) bool { return i.Observed != "" })
	header := "  SERVICEIMPORT\tTYPE\tIPS\tCLUSTERS\tREADY"
	if dns {
		header += "\tDNS NAME\tRESOLVES HERE TO"
	}
	if traffic {
		header += "\tTRAFFIC BY CLIENT CLUSTER"
	}
	if observed {
		header += "\tANSWERED REQUESTS FROM A POD HERE"
	}
	fmt.Fprintln(w, header)
	for _, i := range imports {
		fmt.Fprintf(w, "  %s/%s\t%s\t%s\t%s\t%s", i.Namespace, i.Name, i.Type, orDash(strings.Join(i.IPs, ",")),
			orDash(strings.Join(i.Clusters, ",")), i.Ready)
		if dns {
			fmt.Fprintf(w, "\t%s\t%s", i.DNSName(), orDash(i.Resolves))
		}
		if traffic {
			fmt.Fprintf(w, "\t%s", orDash(i.Traffic))
		}
		if observed {
			fmt.Fprintf(w, "\t%s", orDash(i.Observed))
		}
		fmt.Fprintln(w)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
