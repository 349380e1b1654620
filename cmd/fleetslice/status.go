package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/ops/statusview"
)

func newStatusCommand() *cobra.Command {
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each local cluster's zones, Services, EndpointSlices, hints and ServiceImports (real clusters: kubectl fleetslice status)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := localset.Load(workdirFlag(cmd))
			if err != nil {
				return err
			}
			if watch <= 0 {
				return showStatus(cmd.Context(), cmd.OutOrStdout(), cs, false, nil)
			}
			return watchStatus(cmd.Context(), cmd.OutOrStdout(), cs, watch, nil)
		},
	}
	cmd.Flags().DurationVar(&watch, "watch", 0, "refresh every interval until interrupted (0: print once)")
	return cmd
}

// prober sends requests to an import from a Pod of a member and returns the answers; only the
// process that runs the pod network (`fleetslice run`) has one.
type prober func(ctx context.Context, member string, imp statusview.Import) []string

// requestsPerImport is how many requests each member's client sends to each import per refresh:
// enough to see a few percent of spill, few enough to stay cheap on 2 cores.
const requestsPerImport = 50

// probeWith sends requests to every import from the member's client Pod (the samples' app=client).
func probeWith(pn *localset.PodNetwork) prober {
	return func(ctx context.Context, member string, imp statusview.Import) []string {
		if imp.TCPPort == 0 || len(imp.IPs) == 0 {
			return nil
		}
		return pn.Ask(ctx, member, imp.Namespace, "client", imp.IPs[0], imp.TCPPort, requestsPerImport)
	}
}

func showStatus(ctx context.Context, w io.Writer, cs *localset.ClusterSet, clear bool, probe prober) error {
	views := make([]statusview.Cluster, 0, len(cs.Members))
	for _, m := range cs.Members {
		c, err := cs.Client(m)
		if err != nil {
			views = append(views, statusview.Cluster{Name: m, Err: err})
			continue
		}
		view := statusview.Collect(ctx, m, c)
		if d, ok := cs.DNS[m]; ok {
			statusview.ResolveImports(ctx, &view, func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
				return localset.Resolve(ctx, d.Address, name, qtype)
			})
		}
		if probe != nil {
			for i := range view.Imports {
				answers := probe(ctx, m, view.Imports[i])
				view.Imports[i].Observed = statusview.SummariseAnswers(answers, clusterOfNode(cs))
			}
		}
		for _, node := range cs.AgentNodes(m) {
			// Only `fleetslice run` starts agents; a ClusterSet from `up` has no rulesets.
			if path := cs.RulesetPath(node); fileExists(path) {
				view.Agents = append(view.Agents, statusview.ReadAgent(node, path))
			}
		}
		views = append(views, view)
	}
	if ctx.Err() != nil {
		// Interrupted while collecting: the half-read view would only show errors.
		return nil
	}
	if clear {
		// Home the cursor and clear the screen so the view refreshes in place.
		fmt.Fprint(w, "\x1b[H\x1b[2J")
	}
	fmt.Fprintf(w, "fleetslice ClusterSet (%s)  %s\n\n", cs.Kubeconfig, time.Now().Format(time.TimeOnly))
	return statusview.Render(w, views)
}

// watchStatus refreshes the view in place on a terminal and prints one view after another
// otherwise, so logs of `make run` stay readable.
func watchStatus(ctx context.Context, w io.Writer, cs *localset.ClusterSet, every time.Duration, probe prober) error {
	tty := isTerminal(w)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		if err := showStatus(ctx, w, cs, tty, probe); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// clusterOfNode finds the member a Node of the local ClusterSet belongs to: its name starts with
// the member's.
func clusterOfNode(cs *localset.ClusterSet) func(string) string {
	return func(node string) string {
		for _, m := range cs.Members {
			if strings.HasPrefix(node, m+"-") {
				return m
			}
		}
		return ""
	}
}
