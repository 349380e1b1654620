package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/internal/localset"
)

func newRunCommand() *cobra.Command {
	flags := &upFlags{}
	var samples string
	var refresh time.Duration
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Bring up a local ClusterSet, apply the samples, run fleetslice on it and show what it decides until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			start := time.Now()
			cs, err := localset.Up(ctx, flags.options(cmd))
			if err != nil {
				return err
			}
			// Tear down on every way out, including Ctrl-C, which cancels ctx.
			defer func() {
				fmt.Fprintln(cmd.ErrOrStderr(), "tearing down the ClusterSet ...")
				if downErr := localset.Down(context.WithoutCancel(ctx), cs.Workdir, cmd.ErrOrStderr()); downErr != nil && err == nil {
					err = downErr
				}
			}()
			printClusterSet(cmd, cs, time.Since(start))
			for _, m := range cs.Members {
				c, err := cs.Client(m)
				if err != nil {
					return err
				}
				if err := localset.ApplyDir(ctx, c, samples); err != nil {
					return fmt.Errorf("applying samples to %s: %w", m, err)
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "applied %s to %v; press Ctrl-C to stop and tear down\n", samples, cs.Members)
			return watchStatus(ctx, cmd.OutOrStdout(), cs, refresh)
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&samples, "samples", "config/samples", "directory of manifests applied to every member")
	cmd.Flags().DurationVar(&refresh, "refresh", 2*time.Second, "how often the status view refreshes")
	return cmd
}
