package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/pkg/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version the plugin was built from",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "kubectl-fleetslice", version.Version)
		},
	}
}
