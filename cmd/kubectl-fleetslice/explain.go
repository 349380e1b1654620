package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/internal/ops/explain"
)

// explainFlags are the flags of both explain subcommands.
type explainFlags struct {
	kubeconfig, kubeContext, namespace string
}

func (f *explainFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig to read (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context of the cluster (default: the current context)")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace of the object (default: the context's namespace, else default)")
}

// resolveNamespace falls back to the context's namespace as kubectl does.
func (f *explainFlags) resolveNamespace() (string, error) {
	if f.namespace != "" {
		return f.namespace, nil
	}
	ns, _, err := clientConfig(f.kubeconfig, f.kubeContext).Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	return ns, nil
}

func newExplainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain (service | import) -n NAMESPACE NAME",
		Short: "Say why a Service's EndpointSlices and hints, or an import's allocation across clusters, are what they are",
		Long: `explain reads the live objects a fleetslice controller decides from, re-runs the controller's
own decision functions on them, and prints the inputs, the decision, and whether the objects in
the cluster match it (and if not, what differs). The manager's flags are read from its
Deployment when it can be found, else its defaults are assumed (the output says which).`,
	}
	cmd.AddCommand(newExplainServiceCommand(), newExplainImportCommand())
	return cmd
}

func newExplainServiceCommand() *cobra.Command {
	f := &explainFlags{}
	cmd := &cobra.Command{
		Use:     "service -n NAMESPACE NAME",
		Aliases: []string{"svc"},
		Short:   "Explain a Service's EndpointSlices (slice count, endpoints) and zone hints",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := f.resolveNamespace()
			if err != nil {
				return err
			}
			c, err := newClient(f.kubeconfig, f.kubeContext)
			if err != nil {
				return err
			}
			settings := explain.DiscoverSettings(cmd.Context(), c)
			in, err := explain.GatherService(cmd.Context(), c, ns, args[0], settings)
			if err != nil {
				return err
			}
			return explain.ExplainService(in).Render(cmd.OutOrStdout())
		},
	}
	f.bind(cmd)
	return cmd
}

func newExplainImportCommand() *cobra.Command {
	f := &explainFlags{}
	var brokerKubeconfig, brokerContext, brokerNamespace string
	var peers []string
	cmd := &cobra.Command{
		Use:     "import -n NAMESPACE NAME",
		Aliases: []string{"serviceimport"},
		Short:   "Explain a ServiceImport's allocation across clusters, its Ready condition and derived Service",
		Long: `import explains one ServiceImport as the member of --context sees it. The allocation across
clusters depends on every member's worker CPU and every exporter's preference: the broker holds
both (--broker-kubeconfig); without it, name the other members' contexts with --member-context
so their CPU is read from their Nodes, and the preference is read from this member's export.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := f.resolveNamespace()
			if err != nil {
				return err
			}
			c, err := newClient(f.kubeconfig, f.kubeContext)
			if err != nil {
				return err
			}
			var broker *explain.Broker
			if brokerKubeconfig != "" || brokerContext != "" {
				path := brokerKubeconfig
				if path == "" {
					path = f.kubeconfig
				}
				bc, err := newClient(path, brokerContext)
				if err != nil {
					return fmt.Errorf("broker: %w", err)
				}
				broker = &explain.Broker{Client: bc, Namespace: brokerNamespace}
			}
			var members []explain.Peer
			for _, p := range peers {
				pc, err := newClient(f.kubeconfig, p)
				if err != nil {
					return err
				}
				members = append(members, explain.Peer{Context: p, Client: pc})
			}
			settings := explain.DiscoverSettings(cmd.Context(), c)
			in, err := explain.GatherImport(cmd.Context(), c, broker, members, ns, args[0], settings, time.Now())
			if err != nil {
				return err
			}
			return explain.ExplainImport(in).Render(cmd.OutOrStdout())
		},
	}
	f.bind(cmd)
	fs := cmd.Flags()
	fs.StringVar(&brokerKubeconfig, "broker-kubeconfig", "", "kubeconfig of the ClusterSet's broker, to read every export and every member's CPU as the controller does")
	fs.StringVar(&brokerContext, "broker-context", "", "context of the broker (in --broker-kubeconfig, else in --kubeconfig)")
	fs.StringVar(&brokerNamespace, "broker-namespace", multicluster.DefaultNamespace, "the ClusterSet's namespace in the broker")
	fs.StringArrayVar(&peers, "member-context", nil, "context (in --kubeconfig) of another member, to read its CPU from its Nodes; repeat for several")
	return cmd
}
