package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/ops/join"
)

type joinFlags struct {
	brokerKubeconfig, brokerContext, kubeconfig, kubeContext string
	opts                                                     join.Options
}

func (f *joinFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.brokerKubeconfig, "broker-kubeconfig", "", "admin kubeconfig of the ClusterSet's broker (required)")
	fs.StringVar(&f.brokerContext, "broker-context", "", "context in --broker-kubeconfig (default: its current context)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "admin kubeconfig of the member cluster (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "context in --kubeconfig (default: its current context)")
	fs.StringVar(&f.opts.ClusterID, "cluster-id", "", "the member's id in the ClusterSet, a DNS label")
	fs.StringVar(&f.opts.BrokerNamespace, "broker-namespace", "", "the ClusterSet's namespace in the broker (default fleetslice-broker)")
	fs.StringVar(&f.opts.MemberNamespace, "namespace", join.DefaultMemberNamespace, "namespace fleetslice is installed in, in the member")
	_ = cmd.MarkFlagRequired("broker-kubeconfig")
}

func (f *joinFlags) configs() error {
	var err error
	if f.opts.Broker, err = loadConfig(f.brokerKubeconfig, f.brokerContext); err != nil {
		return fmt.Errorf("broker kubeconfig: %w", err)
	}
	if f.opts.Member, err = loadConfig(f.kubeconfig, f.kubeContext); err != nil {
		return fmt.Errorf("member kubeconfig: %w", err)
	}
	return nil
}

func newJoinCommand() *cobra.Command {
	f := &joinFlags{}
	var renew bool
	cmd := &cobra.Command{
		Use:   "join --broker-kubeconfig B [--kubeconfig M] [--context C] (--cluster-id ID | --renew)",
		Short: "Join a member cluster (fleetslice installed from dist/install.yaml) to a ClusterSet's broker",
		Long: `join creates the member's identity in the broker (a ServiceAccount bound to the member Role,
writing only its own cluster's records), stores a kubeconfig with its token as Secret
fleetslice-broker-kubeconfig in the member, sets the member's ClusterProperty objects and restarts
the manager. A cluster id held by another member is refused and nothing is written; of two joins
racing for one id, exactly one wins and the other is refused, naming the winner.

Run again, or with --renew (which reads the id, broker namespace and address from the member), to
renew the token: the manager takes the new one up from its mounted Secret without a restart, and
imports keep flowing. The old token stays valid until it expires.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !renew && f.opts.ClusterID == "" {
				return fmt.Errorf("name the member with --cluster-id, or renew a joined member's token with --renew")
			}
			if err := f.configs(); err != nil {
				return err
			}
			var res join.Result
			var err error
			if renew {
				res, err = join.Renew(cmd.Context(), f.opts)
			} else {
				res, err = join.Apply(cmd.Context(), f.opts)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			expires := "carries no expiry"
			if !res.Expires.IsZero() {
				expires = "expires " + res.Expires.Format(time.RFC3339)
			}
			if res.Renewed {
				fmt.Fprintf(out, "renewed the broker token (%s); the manager takes it up without a restart once the kubelet refreshes its Secret (about a minute)\n", expires)
				return nil
			}
			fmt.Fprintf(out, "joined %s to the ClusterSet (token %s); its manager restarts with multi-cluster services on\n", f.opts.ClusterID, expires)
			return nil
		},
	}
	f.bind(cmd)
	cmd.Flags().BoolVar(&renew, "renew", false, "renew the token of a member that has joined, from what the member holds (no --cluster-id needed)")
	cmd.Flags().StringVar(&f.opts.BrokerServer, "broker-server", "", "the broker's address as the member's manager reaches it (default: the server in --broker-kubeconfig; with --renew, the one the member uses)")
	cmd.Flags().DurationVar(&f.opts.TokenExpiration, "token-expiration", 365*24*time.Hour, "lifetime asked of the member's broker token (the broker may cap it)")
	return cmd
}

func newLeaveCommand() *cobra.Command {
	f := &joinFlags{}
	cmd := &cobra.Command{
		Use:   "leave --broker-kubeconfig B [--kubeconfig M] [--context C]",
		Short: "Take a member cluster out of its ClusterSet; the others withdraw its endpoints at once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.configs(); err != nil {
				return err
			}
			if f.opts.ClusterID == "" {
				c, err := client.New(f.opts.Member, client.Options{})
				if err != nil {
					return err
				}
				if f.opts.ClusterID, err = clusterid.Read(cmd.Context(), c); err != nil {
					return err
				}
				if f.opts.ClusterID == "" {
					return fmt.Errorf("the member has no ClusterProperty %s: name the id with --cluster-id", clusterid.PropertyName)
				}
			}
			if err := join.Leave(cmd.Context(), f.opts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s left the ClusterSet\n", f.opts.ClusterID)
			return nil
		},
	}
	f.bind(cmd)
	return cmd
}
