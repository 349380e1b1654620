package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

func newRunCommand() *cobra.Command {
	flags := &upFlags{}
	var samples, binDir string
	var refresh time.Duration
	var dryRunAgents bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Bring up a local ClusterSet, apply the samples, run fleetslice on it and show what it decides until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			start := time.Now()
			// Read before anything starts: a wrong --samples (or a run outside the repository,
			// where config/samples is missing) fails at once, not after the ClusterSet is up.
			manifests, err := localset.ReadManifests(samples)
			if err != nil {
				return fmt.Errorf("reading --samples: %w (run from the repository root, or point --samples at a directory of manifests)", err)
			}
			opts := flags.options(cmd)
			opts.DNS = true
			opts.PodNetwork = !dryRunAgents
			if missing := localset.PodNetworkMissing(); opts.PodNetwork && len(missing) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no pod network (it needs %s): Pods get IPs but run nothing, and one dry-run agent per zone shows the rules it would program\n",
					strings.Join(missing, " and "))
				opts.PodNetwork = false
			}
			cs, err := localset.Up(ctx, opts)
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
			procs, err := startComponents(ctx, cs, binDir, !opts.PodNetwork)
			defer func() {
				for _, p := range procs {
					if stopErr := p.Stop(10 * time.Second); stopErr != nil && err == nil {
						err = stopErr
					}
				}
			}()
			if err != nil {
				return err
			}
			var probe prober
			if opts.PodNetwork {
				pn, err := cs.StartPodNetwork(ctx, binDir, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				// Stopped before the components above (deferred later, run earlier): the Pods'
				// processes and the agents go before the API servers they talk to.
				defer func() {
					if stopErr := pn.Stop(); stopErr != nil && err == nil {
						err = stopErr
					}
				}()
				probe = probeWith(pn)
			}
			for _, p := range procs {
				fmt.Fprintf(cmd.ErrOrStderr(), "started %s (logs: %s)\n", p.Name, p.Log)
			}
			printDNS(cmd, cs)
			for _, m := range cs.Members {
				c, err := cs.Client(m)
				if err != nil {
					return err
				}
				if err := localset.Apply(ctx, c, manifests); err != nil {
					return fmt.Errorf("applying samples to %s: %w", m, err)
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "applied %s to %v; press Ctrl-C to stop and tear down\n", samples, cs.Members)
			return watchStatus(ctx, cmd.OutOrStdout(), cs, refresh, probe)
		},
	}
	flags.register(cmd)
	cmd.Flags().StringVar(&samples, "samples", "config/samples", "directory of manifests applied to every member")
	cmd.Flags().StringVar(&binDir, "bin-dir", defaultBinDir(), "directory holding the manager and agent binaries")
	cmd.Flags().DurationVar(&refresh, "refresh", 2*time.Second, "how often the status view refreshes")
	cmd.Flags().BoolVar(&dryRunAgents, "dry-run-agents", false, "no pod network: one dry-run agent per zone instead of a real agent per Node (the default without root)")
	return cmd
}

// startComponents runs one fleetslice manager per member cluster, each against its own context,
// each member's DNS when Up planned one, and with dryRunAgents one node agent per zone of each
// member in dry-run mode (without a pod network the simulated Nodes have no kernel of their own;
// each agent writes the ruleset it would program to <workdir>/rulesets/<node>.nft, and learns its
// cluster id from the ClusterProperty localset writes, as an installed agent does).
func startComponents(ctx context.Context, cs *localset.ClusterSet, binDir string, dryRunAgents bool) ([]*localset.Process, error) {
	var procs []*localset.Process
	if err := os.MkdirAll(filepath.Join(cs.Workdir, "rulesets"), 0o755); err != nil {
		return nil, err
	}
	for _, m := range cs.Members {
		p, err := cs.StartManager(m, binDir)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
		for _, node := range cs.AgentNodes(m) {
			if !dryRunAgents {
				break
			}
			p, err := cs.StartProcess("agent-"+node, filepath.Join(binDir, "agent"),
				"--kubeconfig", cs.Kubeconfig, "--context", localset.Context(m), "--node-name", node,
				"--dataplane=dry-run", "--dry-run-output", cs.RulesetPath(node),
				"--metrics-bind-address=0", "--health-probe-bind-address=0")
			if err != nil {
				return procs, err
			}
			procs = append(procs, p)
		}
		if _, ok := cs.DNS[m]; ok {
			p, err := cs.StartDNS(ctx, m, binDir)
			if p != nil {
				procs = append(procs, p)
			}
			if err != nil {
				return procs, err
			}
		}
	}
	return procs, nil
}

// printDNS says where each member's DNS answers and how to ask it from a Pod.
func printDNS(cmd *cobra.Command, cs *localset.ClusterSet) {
	for _, m := range cs.Members {
		d, ok := cs.DNS[m]
		if !ok {
			continue
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s's DNS (clusterset.local, cluster.local) on %s\n", m, d.Address)
		if d.Exec {
			// With a pod network the samples' client Pod sends a real request; without one, exec'd
			// commands run on the host and can only resolve the name.
			ask := "deploy/client -- curl -s web.demo.svc.clusterset.local"
			if cs.Kubelets == nil {
				ask = "POD -- getent hosts web.demo.svc.clusterset.local"
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "  kubectl --kubeconfig %s --context %s exec -n demo %s\n",
				cs.Kubeconfig, localset.Context(m), ask)
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "  (exec'd commands use the host's resolver: giving kwok its own /etc/resolv.conf needs root and unshare)\n")
		}
	}
}

// defaultBinDir is where `make build` puts the binaries: next to this one.
func defaultBinDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(exe)
}
