package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/ops/statusview"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig string
	var contexts []string
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "status [--kubeconfig K] [--context A --context B ...]",
		Short: "Show each cluster's zones, Services, EndpointSlices, hints and ServiceImports",
		Long: `status reads each named cluster (every --context given, or the kubeconfig's current
context) and shows per zone its Nodes, ready CPU and running Pods; per Service its endpoints,
slices, zones and hints; per ServiceImport its clusters, IPs and Ready condition. A cluster that
cannot be read is reported and the others are still shown.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(contexts) == 0 {
				current, err := currentContext(kubeconfig)
				if err != nil {
					return fmt.Errorf("kubeconfig: %w", err)
				}
				contexts = []string{current}
			}
			if watch <= 0 {
				return showStatus(cmd.Context(), cmd.OutOrStdout(), kubeconfig, contexts, false)
			}
			tty := isTerminal(cmd.OutOrStdout())
			ticker := time.NewTicker(watch)
			defer ticker.Stop()
			for {
				if err := showStatus(cmd.Context(), cmd.OutOrStdout(), kubeconfig, contexts, tty); err != nil {
					return err
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-ticker.C:
				}
			}
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig to read (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringArrayVar(&contexts, "context", nil, "kubeconfig context of a cluster to show; repeat for several (default: the current context)")
	cmd.Flags().DurationVar(&watch, "watch", 0, "refresh every interval until interrupted (0: print once)")
	return cmd
}

// showStatus collects every context's view. Errors stay in the view so that one unreachable
// cluster does not hide the others.
func showStatus(ctx context.Context, w io.Writer, kubeconfig string, contexts []string, clear bool) error {
	views := make([]statusview.Cluster, 0, len(contexts))
	for _, name := range contexts {
		c, err := newClient(kubeconfig, name)
		if err != nil {
			views = append(views, statusview.Cluster{Name: name, Err: err})
			continue
		}
		// The ClusterSet id, where the cluster has joined one, says which member a context is.
		if id, err := clusterid.Read(ctx, c); err == nil && id != "" && id != name {
			name += " (cluster " + id + ")"
		}
		views = append(views, statusview.Collect(ctx, name, c))
	}
	if ctx.Err() != nil {
		// Interrupted while collecting: the half-read view would only show errors.
		return nil
	}
	if clear {
		// Home the cursor and clear the screen so the view refreshes in place.
		fmt.Fprint(w, "\x1b[H\x1b[2J")
	}
	fmt.Fprintf(w, "fleetslice status  %s\n\n", time.Now().Format(time.TimeOnly))
	return statusview.Render(w, views)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
