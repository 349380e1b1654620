package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/internal/bench"
	"github.com/fleetslice/fleetslice/internal/e2ebench"
	"github.com/fleetslice/fleetslice/internal/localset"
)

// newMeasureMCSCommand measures multi-cluster services on a fresh local ClusterSet with one
// manager per member: how fast a new ready endpoint reaches every other member's imported slices,
// and how fast a lost member's endpoints are withdrawn after its Lease expires.
func newMeasureMCSCommand() *cobra.Command {
	var opts e2ebench.MCSOptions
	var clusters, nodes int
	var binDir string
	var lease time.Duration
	cmd := &cobra.Command{
		Use:   "measure-mcs",
		Short: "Measure multi-cluster services propagation latency and lost-cluster withdrawal on a local ClusterSet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			ctx := cmd.Context()
			machine := bench.DescribeMachine()
			began := time.Now()
			opts.Log = cmd.ErrOrStderr()
			cs, err := localset.Up(ctx, localset.Options{
				Workdir: workdirFlag(cmd), Clusters: clusters, NodesPerCluster: nodes, Log: cmd.ErrOrStderr(),
			})
			if err != nil {
				return err
			}
			defer func() {
				if downErr := localset.Down(context.WithoutCancel(ctx), cs.Workdir, cmd.ErrOrStderr()); downErr != nil && err == nil {
					err = downErr
				}
			}()
			managers := map[string]*localset.Process{}
			defer func() {
				for _, p := range managers {
					if stopErr := p.Stop(10 * time.Second); stopErr != nil && err == nil {
						err = stopErr
					}
				}
			}()
			for _, m := range cs.Members {
				p, err := cs.StartProcess("manager-"+m, filepath.Join(binDir, "manager"),
					"--kubeconfig", cs.Kubeconfig, "--context", localset.Context(m),
					"--broker-kubeconfig", cs.BrokerKubeconfig(m), "--cluster-lease-duration", lease.String(),
					"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
				if err != nil {
					return err
				}
				managers[m] = p
			}
			run, err := e2ebench.StartMCS(ctx, cs, opts)
			if err != nil {
				return err
			}
			defer run.Close()
			prop, err := run.Propagate(ctx)
			if err != nil {
				return err
			}
			lost := cs.Members[len(cs.Members)-1]
			// Stopped once only: localset.Process.Stop blocks forever when called on a process it
			// already stopped.
			withdrawals, err := run.LoseCluster(ctx, lost, func() error {
				p := managers[lost]
				delete(managers, lost)
				return p.Stop(10 * time.Second)
			})
			if err != nil {
				return err
			}
			printMCSTables(cmd.OutOrStdout(), machine, mcsReport{
				clusters: clusters, nodes: nodes, lease: lease, lost: lost, opts: opts,
				prop: prop, withdrawals: withdrawals, wall: time.Since(began),
			})
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Services, "services", 200, "Services exported by every member (same names everywhere)")
	f.IntVar(&opts.Samples, "samples", 50, "Services scaled up by one Pod in the first member")
	f.DurationVar(&opts.ChangeInterval, "change-interval", 200*time.Millisecond, "pause between two scale-ups")
	f.BoolVar(&opts.Headless, "headless", false, "export headless Services instead of ClusterSetIP ones")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the sample")
	f.DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "how long each phase may take")
	f.IntVar(&clusters, "clusters", 3, "member clusters")
	f.IntVar(&nodes, "nodes", 9, "simulated Nodes per member")
	f.DurationVar(&lease, "cluster-lease-duration", 10*time.Second, "members' Lease duration in the broker")
	f.StringVar(&binDir, "bin-dir", defaultBinDir(), "directory holding the manager binary")
	return cmd
}

type mcsReport struct {
	clusters, nodes int
	lease           time.Duration
	lost            string
	opts            e2ebench.MCSOptions
	prop            *e2ebench.Propagation
	withdrawals     []e2ebench.Withdrawal
	wall            time.Duration
}

func printMCSTables(w io.Writer, machine bench.Machine, r mcsReport) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	t := machine.Table()
	fmt.Fprintln(w, "Machine\n\n| "+strings.Join(t.Header, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(t.Header)))
	fmt.Fprintln(w, "| "+strings.Join(t.Rows[0], " | ")+" |")

	p := r.prop
	kind := "ClusterSetIP"
	if r.opts.Headless {
		kind = "Headless"
	}
	fmt.Fprintf(w, "\nPropagation: %d members x %d exported %s Services (1 Pod each per member, %d simulated Nodes per member); "+
		"%d Services scaled up by one Pod in %s, %s apart; every member imports every cluster's endpoints %s after creation\n\n",
		r.clusters, r.opts.Services, kind, r.nodes, r.opts.Samples, p.Origin, r.opts.ChangeInterval, p.Settled.Round(100*time.Millisecond))
	fmt.Fprintln(w, "| measured from | pairs | missing | p50 | p99 | max |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, row := range []struct {
		name string
		ds   []time.Duration
	}{
		{"Pod Ready seen by a watch in the origin (lower bound)", p.FromWatch},
		{"Pod Ready lastTransitionTime, 1 s resolution (upper bound)", p.FromCondition},
	} {
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s |\n", row.name, len(row.ds), p.Missing,
			ms(e2ebench.Percentile(row.ds, 50)), ms(e2ebench.Percentile(row.ds, 99)), ms(e2ebench.Percentile(row.ds, 100)))
	}
	fmt.Fprintln(w, "\nA pair is (sampled Service, other member); the end is the new Pod's IP listed ready in that member's imported EndpointSlices of the origin, seen by a watch.")

	fmt.Fprintf(w, "\nLost cluster: %s's manager stopped (lease %s, renewed every third of it)\n\n", r.lost, r.lease)
	fmt.Fprintln(w, "| member | imported slices of the lost cluster | Lease expiry -> first withdrawn | Lease expiry -> all withdrawn | manager stopped -> all withdrawn |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	var worst time.Duration
	for _, wd := range r.withdrawals {
		worst = max(worst, wd.AfterExpiry)
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", wd.Member, wd.SlicesBefore, ms(wd.FirstAfterExpiry), ms(wd.AfterExpiry), ms(wd.AfterStop))
	}
	fmt.Fprintf(w, "| max | | | %s | |\n", ms(worst))
	fmt.Fprintf(w, "\nWall time: %s\n", r.wall.Round(time.Second))
	fmt.Fprintf(w, "Command: %s\n", strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " "))
}
