package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/join"
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

func loadConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}

func newJoinCommand() *cobra.Command {
	f := &joinFlags{}
	cmd := &cobra.Command{
		Use:   "join --broker-kubeconfig B --kubeconfig M --cluster-id ID",
		Short: "Join a member cluster (fleetslice installed from dist/install.yaml) to a ClusterSet's broker",
		Long: `join creates the member's identity in the broker (a ServiceAccount bound to the member Role,
writing only its own cluster's records), stores a kubeconfig with its token as Secret
fleetslice-broker-kubeconfig in the member, sets the member's ClusterProperty objects and restarts
the manager. Run again to renew the token. A cluster id held by another member is refused and
nothing is written.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.configs(); err != nil {
				return err
			}
			if err := join.Join(cmd.Context(), f.opts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "joined %s to the ClusterSet; its manager restarts with multi-cluster services on\n", f.opts.ClusterID)
			return nil
		},
	}
	f.bind(cmd)
	cmd.Flags().StringVar(&f.opts.BrokerServer, "broker-server", "", "the broker's address as the member's manager reaches it (default: the server in --broker-kubeconfig)")
	cmd.Flags().DurationVar(&f.opts.TokenExpiration, "token-expiration", 365*24*time.Hour, "lifetime asked of the member's broker token (the broker may cap it)")
	_ = cmd.MarkFlagRequired("cluster-id")
	return cmd
}

func newLeaveCommand() *cobra.Command {
	f := &joinFlags{}
	cmd := &cobra.Command{
		Use:   "leave --broker-kubeconfig B --kubeconfig M",
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
