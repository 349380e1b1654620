// Command fleetslice is the developer CLI: it brings up a local ClusterSet of simulated clusters,
// shows what fleetslice decided in it, and runs the simulator and benchmarks. It links the lab
// (envtest, the benchmarks, plotting); what users run against real clusters is the kubectl
// plugin in cmd/kubectl-fleetslice, which links none of it.
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
		Short:         "Run and inspect fleetslice on a local ClusterSet of simulated clusters, and run the simulator and benchmarks (users run `kubectl fleetslice`)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("workdir", ".fleetslice", "directory holding the local ClusterSet's state, logs and kubeconfig")
	root.AddCommand(newUpCommand(), newDownCommand(), newStatusCommand(), newRunCommand(), newSimCommand(), newBenchCommand())
	return root
}

func workdirFlag(cmd *cobra.Command) string {
	dir, _ := cmd.Flags().GetString("workdir")
	return dir
}
