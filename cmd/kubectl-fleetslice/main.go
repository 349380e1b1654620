// Command kubectl-fleetslice is the user CLI, run as the kubectl plugin `kubectl fleetslice`
// against real clusters: it joins members to a ClusterSet and takes them out again, shows what
// fleetslice decided in each cluster, and explains why. It links nothing of the development lab
// (envtest, fake clients, benchmarks, plotting): deps_test.go keeps it that way, so the binary
// platform engineers install stays small and carries no test harness.
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
		// kubectl finds the plugin by its file name; help and usage name it as users type it.
		Use:           "kubectl-fleetslice",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fleetslice"},
		Short:         "Join clusters to a fleetslice ClusterSet, show what fleetslice decided in them, and explain why",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newJoinCommand(), newLeaveCommand(), newStatusCommand(), newExplainCommand(), newVersionCommand())
	return root
}
