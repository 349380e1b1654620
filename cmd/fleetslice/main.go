// Command fleetslice is the developer CLI: it brings up a local ClusterSet of simulated clusters,
// shows what fleetslice decided in it, and runs the simulator and benchmarks.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	// The CLI reports through its own output; controller-runtime's clients would otherwise warn
	// that no logger is set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleetslice",
		Short:         "Join clusters to a ClusterSet, and run and inspect fleetslice on a local ClusterSet of simulated clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("workdir", ".fleetslice", "directory holding the local ClusterSet's state, logs and kubeconfig")
	root.AddCommand(newUpCommand(), newDownCommand(), newStatusCommand(), newRunCommand(), newSimCommand(), newBenchCommand(),
		newJoinCommand(), newLeaveCommand())
	return root
}

func workdirFlag(cmd *cobra.Command) string {
	dir, _ := cmd.Flags().GetString("workdir")
	return dir
}
