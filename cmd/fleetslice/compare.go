package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/internal/e2ebench"
	"github.com/fleetslice/fleetslice/internal/localset"
)

// newCompareCommand runs one Deployment rollout under fleetslice and under
// kube-controller-manager's own EndpointSlice controller, side by side on a fresh local
// ClusterSet, and prints the EndpointSlice API writes each made.
func newCompareCommand() *cobra.Command {
	var pods, nodes int
	var binDir string
	var timeout, batch time.Duration
	cmd := &cobra.Command{
		Use:   "compare-rollout",
		Short: "Roll out the same Deployment under fleetslice and kube-controller-manager and compare EndpointSlice writes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			kcmArgs := map[string]string{}
			if batch > 0 {
				kcmArgs["endpointslice-updates-batch-period"] = batch.String()
			}
			cs, err := localset.Up(ctx, localset.Options{
				ControllerManagerArgs: kcmArgs,
				Workdir:               workdirFlag(cmd), Clusters: 2, NodesPerCluster: nodes,
				UpstreamEndpointSlices: []string{localset.MemberName(2)}, DisableQPSLimits: true, NoBroker: true, Log: cmd.ErrOrStderr(),
			})
			if err != nil {
				return err
			}
			defer func() {
				if downErr := localset.Down(context.WithoutCancel(ctx), cs.Workdir, cmd.ErrOrStderr()); downErr != nil && err == nil {
					err = downErr
				}
			}()
			// Debug logs name every sync's writes, for reading where they went.
			manager, err := cs.StartProcess("manager-"+cs.Members[0], binDir+"/manager",
				"--kubeconfig", cs.Kubeconfig, "--context", localset.Context(cs.Members[0]),
				"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--zap-log-level=debug",
				"--endpoint-updates-batch-period", batch.String())
			if err != nil {
				return err
			}
			defer func() {
				if stopErr := manager.Stop(10 * time.Second); stopErr != nil && err == nil {
					err = stopErr
				}
			}()
			sides, err := e2ebench.Rollout(ctx, cs, manager.PID(), e2ebench.Options{Pods: pods, Timeout: timeout, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			printRolloutTable(cmd.OutOrStdout(), pods, nodes, batch, sides)
			return nil
		},
	}
	cmd.Flags().IntVar(&pods, "pods", 1000, "replicas of the Deployment rolled out")
	cmd.Flags().IntVar(&nodes, "nodes", 30, "simulated Nodes per member")
	cmd.Flags().StringVar(&binDir, "bin-dir", defaultBinDir(), "directory holding the manager binary")
	cmd.Flags().DurationVar(&batch, "batch-period", 0, "endpoint updates batch period given to both controllers")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long each phase may take")
	return cmd
}

func printRolloutTable(w io.Writer, pods, nodes int, batch time.Duration, sides []e2ebench.Side) {
	fmt.Fprintf(w, "Rolling update of %d Pods (maxSurge 25%%, maxUnavailable 0), %d simulated Nodes in 3 zones, 100 endpoints per slice, batch period %s\n\n", pods, nodes, batch)
	fmt.Fprintln(w, "| controller | creates | updates | deletes | total writes | conflicts | peak slices | final slices | converged | RSS MiB | writes to come up |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range sides {
		total := s.Writes["create"] + s.Writes["update"] + s.Writes["patch"] + s.Writes["delete"]
		setup := s.SetupWrites["create"] + s.SetupWrites["update"] + s.SetupWrites["patch"] + s.SetupWrites["delete"]
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %s | %d | %d |\n", s.Controller,
			s.Writes["create"], s.Writes["update"]+s.Writes["patch"], s.Writes["delete"], total, s.Writes["conflict"],
			s.PeakSlices, s.FinalSlices, s.Converged.Round(100*time.Millisecond), s.RSSBytes>>20, setup)
	}
	fmt.Fprintln(w, "\nWrites are EndpointSlice requests counted by each member's kube-apiserver (apiserver_request_total).")
	fmt.Fprintln(w, "Both members run kube-controller-manager without client-side QPS limits (fleetslice's client has none), so both controllers react equally fast.")
	fmt.Fprintln(w, "Command: bin/fleetslice compare-rollout --pods", pods, "--nodes", nodes, "--batch-period", batch)
}
