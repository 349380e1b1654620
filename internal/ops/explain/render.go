package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
)

// Render writes the explanation as three parts: the inputs, the decision, and whether the
// cluster matches it.
func (r ServiceReport) Render(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Service %s/%s\n\n", r.Namespace, r.Name)
	fmt.Fprintln(tw, "Inputs")
	renderSettings(tw, r.Settings)
	if !r.Served {
		fmt.Fprintf(tw, "  endpoints:  fleetslice writes none: %s\n", r.Selection)
		renderIgnored(tw, r.SelectionIgnored)
		renderForeign(tw, r.Foreign)
		fmt.Fprintln(tw)
		renderVerdict(tw, r.Differences, "fleetslice has no slices of this Service")
		return tw.Flush()
	}
	fmt.Fprintf(tw, "  pods:       %s selects %d of the namespace's %d Pods\n", r.Selection, r.Selected, r.Pods)
	renderIgnored(tw, r.SelectionIgnored)
	if len(r.PodsOnUnknownNodes) > 0 {
		fmt.Fprintf(tw, "              %d left out until their Node is known: %s\n", len(r.PodsOnUnknownNodes), strings.Join(r.PodsOnUnknownNodes, ", "))
	}
	fmt.Fprintf(tw, "  topology:   %s, from %s\n", r.Mode, r.ModeSource)
	if r.ZoneReason != "" && r.Mode == hints.Auto {
		fmt.Fprintf(tw, "  zones:      none usable: %s (%s)\n", r.ZoneReason, r.ZoneMessage)
	}
	if len(r.Zones) > 0 {
		fmt.Fprintln(tw, "  ZONE\tREADY WORKER CPU\tTRAFFIC SHARE\tREADY ENDPOINTS")
		for _, z := range r.Zones {
			fmt.Fprintf(tw, "  %s\t%dm\t%.1f%%\t%d\n", z.Name, z.MilliCPU, 100*z.Share, z.Ready)
		}
	}
	renderForeign(tw, r.Foreign)

	fmt.Fprintln(tw, "\nDecision")
	for _, s := range r.Sets {
		fmt.Fprintf(tw, "  slices %s %s: %d endpoints need %d slices of at most %d (ceil(%d/%d)); compaction merges above %d; fleetslice has %d\n",
			s.AddressType, s.Ports, s.Desired, s.Ideal, r.Settings.MaxEndpointsPerSlice, s.Desired, r.Settings.MaxEndpointsPerSlice, s.Bound, s.Slices)
	}
	if len(r.Sets) == 0 {
		fmt.Fprintln(tw, "  slices: no endpoints, so one empty placeholder slice per address type")
	}
	for _, h := range r.Hints {
		renderHints(tw, r.Mode, r.Settings, h)
	}
	fmt.Fprintln(tw)
	renderVerdict(tw, r.Differences, "the slices hold exactly the decided endpoints and hints")
	return tw.Flush()
}

func renderSettings(w io.Writer, s Settings) {
	fmt.Fprintf(w, "  settings:   overload threshold %.0f%%, hints on at %d ready endpoints per zone, %d endpoints per slice, compaction slack %d, services %s, cluster selection %s (%s)\n",
		100*s.OverloadThreshold, s.MinEndpointsPerZone, s.MaxEndpointsPerSlice, s.CompactionSlack, s.Services, s.ClusterSelection, s.Source)
}

// renderIgnored repeats the controller's SelectorAnnotationIgnored warning, if any.
func renderIgnored(w io.Writer, ignored string) {
	if ignored != "" {
		fmt.Fprintf(w, "  ignored:    %s\n", ignored)
	}
}

func renderForeign(w io.Writer, foreign []string) {
	if len(foreign) > 0 {
		fmt.Fprintf(w, "  other controllers' slices (not fleetslice's to change): %s\n", strings.Join(foreign, ", "))
	}
}

func renderHints(w io.Writer, mode hints.Mode, s Settings, h HintReport) {
	if !h.Enabled {
		fmt.Fprintf(w, "  hints %s: off: %s: %s\n", h.AddressType, h.Reason, h.Message)
		return
	}
	switch mode {
	case hints.Auto:
		fmt.Fprintf(w, "  hints %s: on: %d ready endpoints, each zone hinted with at least ceil(share x %d / (1+%.2f)) so no endpoint expects over %.0f%% above its fair share\n",
			h.AddressType, h.Ready, h.Ready, s.OverloadThreshold, 100*s.OverloadThreshold)
		fmt.Fprintln(w, "  ZONE\tMINIMUM\tDECIDED\tIN CLUSTER")
		for _, z := range h.PerZone {
			fmt.Fprintf(w, "  %s\t%d\t%d\t%d\n", z.Zone, z.Minimum, z.Decided, z.InPlace)
		}
	default:
		fmt.Fprintf(w, "  hints %s: on: %s hints each of %d ready endpoints for its own zone\n", h.AddressType, mode, h.Ready)
	}
	fmt.Fprintf(w, "  expected traffic: decided hints %s; hints in the cluster %s\n", trafficString(h.Decided), trafficString(h.Current))
}

func renderVerdict(w io.Writer, differences []string, matches string) {
	if len(differences) == 0 {
		fmt.Fprintf(w, "In the cluster: MATCHES: %s\n", matches)
		return
	}
	fmt.Fprintln(w, "In the cluster: DIFFERS")
	for _, d := range differences {
		fmt.Fprintf(w, "  - %s\n", d)
	}
}
