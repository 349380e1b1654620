package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

type upFlags struct {
	clusters, nodes int
	upstream        []string
	cpuScale        map[string]int
}

func (f *upFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.clusters, "clusters", 2, "number of member clusters")
	cmd.Flags().IntVar(&f.nodes, "nodes", 9, "simulated Nodes per member cluster, spread over 3 zones")
	cmd.Flags().StringSliceVar(&f.upstream, "upstream-endpointslices", nil,
		"member clusters that keep kube-controller-manager's own EndpointSlice controller (for comparisons)")
	cmd.Flags().StringToIntVar(&f.cpuScale, "cpu-scale", nil,
		"multiply the Node CPU of members, e.g. cluster-2=2: members of unequal size, whose clients send unequal traffic to PreferSameCluster imports")
}

func (f *upFlags) options(cmd *cobra.Command) localset.Options {
	return localset.Options{
		Workdir:                workdirFlag(cmd),
		Clusters:               f.clusters,
		NodesPerCluster:        f.nodes,
		UpstreamEndpointSlices: f.upstream,
		CPUScale:               f.cpuScale,
		Log:                    cmd.ErrOrStderr(),
	}
}

func newUpCommand() *cobra.Command {
	flags := &upFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local ClusterSet: a broker and N member clusters of simulated Nodes in 3 zones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			cs, err := localset.Up(cmd.Context(), flags.options(cmd))
			if err != nil {
				return err
			}
			printClusterSet(cmd, cs, time.Since(start))
			return nil
		},
	}
	flags.register(cmd)
	return cmd
}

func printClusterSet(cmd *cobra.Command, cs *localset.ClusterSet, took time.Duration) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "ClusterSet up in %s: members %v, broker %s\n", took.Round(100*time.Millisecond), cs.Members, cs.Broker)
	fmt.Fprintf(out, "kubeconfig: %s\n", cs.Kubeconfig)
	for _, m := range append(append([]string{}, cs.Members...), cs.Broker) {
		fmt.Fprintf(out, "  kubectl --kubeconfig %s --context %s get nodes\n", cs.Kubeconfig, localset.Context(m))
	}
}

func newDownCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop every cluster `up` started and remove its state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localset.Down(cmd.Context(), workdirFlag(cmd), cmd.ErrOrStderr())
		},
	}
}
