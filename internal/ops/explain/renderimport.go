package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// Render writes the import's explanation: inputs, decision, and whether the member matches it.
func (r ImportReport) Render(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	self := r.Self
	if self == "" {
		self = "a cluster without a ClusterSet id"
	}
	fmt.Fprintf(tw, "ServiceImport %s/%s in %s (%s)\n\n", r.Namespace, r.Name, self, r.Type)
	fmt.Fprintln(tw, "Inputs")
	renderSettings(tw, r.Settings)
	fmt.Fprintf(tw, "  preference: %s, from %s\n", orNone(r.Preference), r.PreferenceSource)
	if r.Zones {
		fmt.Fprintln(tw, "  zones:      the import prefers the client's zone too, so each cluster's share is split by zone")
	}
	if len(r.Clusters) > 0 {
		fmt.Fprintln(tw, "  CLUSTER\tWORKER CPU\tEXPORTS\tIMPORTED SLICES\tREADY ENDPOINTS\tCPU FROM")
		for _, c := range r.Clusters {
			cpu := "unknown"
			if c.MilliCPU >= 0 {
				cpu = fmt.Sprintf("%dm", c.MilliCPU)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\n", c.Name, cpu, yesNo(c.Exports), c.Slices, c.Ready, c.CPUSource)
		}
	}

	fmt.Fprintln(tw, "\nDecision")
	r.renderAllocation(tw)
	fmt.Fprintf(tw, "  ready:      %s\n", r.Ready)
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "  note:       %s\n", n)
	}
	fmt.Fprintln(tw)
	renderVerdict(tw, r.Differences, "the published allocation, the Ready condition and the derived Service are what the inputs give")
	return tw.Flush()
}

func (r ImportReport) renderAllocation(w io.Writer) {
	if r.Selectors != "" {
		fmt.Fprintf(w, "  selectors:  %s (KEP-5939; cluster selection %s)\n", r.Selectors, r.Settings.ClusterSelection)
		if r.Decision.Mode == "" {
			return
		}
	} else if r.Preference != v1alpha1.PreferSameCluster {
		fmt.Fprintf(w, "  allocation: none: the exports do not ask for %s=%s, so clients spread over every cluster's endpoints\n",
			v1alpha1.AnnotationTrafficDistribution, v1alpha1.PreferSameCluster)
		return
	}
	d := r.Decision
	switch d.Mode {
	case "", "None", "Spread":
		fmt.Fprintf(w, "  allocation: %s (%s) %s: none published, clients spread over every cluster's endpoints\n", orNone(string(d.Mode)), d.Reason, d.Message)
		return
	}
	if r.Selectors != "" && r.Settings.ClusterSelection == locality.SelectionFirstReady {
		fmt.Fprintf(w, "  allocation: %s: each cluster's first tier with a ready endpoint takes all of its traffic, whatever it can carry (max %.2fx); %.1f%% of the ClusterSet's traffic leaves its cluster\n",
			d.Mode, d.MaxLoad, 100*d.Spilled)
	} else {
		fmt.Fprintf(w, "  allocation: %s: no endpoint expects over %.0f%% above its fair share (max %.2fx); %.1f%% of the ClusterSet's traffic leaves its cluster\n",
			d.Mode, 100*r.Settings.OverloadThreshold, d.MaxLoad, 100*d.Spilled)
	}
	fmt.Fprintln(w, "  CLUSTER\tKEEPS\tSENDS\tENDPOINT LOAD")
	for _, c := range d.Clusters {
		var spill []string
		for _, s := range c.Spill {
			spill = append(spill, fmt.Sprintf("%.1f%% to %s", 100*s.Share, s.To))
		}
		fmt.Fprintf(w, "  %s\t%.1f%%\t%s\t%.2fx\n", c.Cluster, 100*c.Local, orDash(strings.Join(spill, ", ")), c.Load)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
