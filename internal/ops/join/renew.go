package join

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

// Renew issues a fresh broker token to a member that has joined, needing only the two admin
// configs: the cluster id, the broker namespace and the broker address the manager uses come
// from what the last join wrote in the member (its ClusterProperty objects and Secret). Options
// given explicitly must agree with those, or override the address and namespace. The manager
// takes the new token up from its mounted Secret without a restart; the old token stays valid
// until it expires (a TokenRequest token cannot be revoked short of removing the identity).
func Renew(ctx context.Context, o Options) (Result, error) {
	o = o.withMemberNamespace()
	scheme, err := broker.Scheme()
	if err != nil {
		return Result{}, err
	}
	member, err := client.New(o.Member, client.Options{Scheme: scheme})
	if err != nil {
		return Result{}, fmt.Errorf("member client: %w", err)
	}
	id, err := clusterid.Read(ctx, member)
	if err != nil {
		return Result{}, err
	}
	switch {
	case id == "":
		return Result{}, fmt.Errorf("the member has not joined a ClusterSet (no ClusterProperty %s): run kubectl fleetslice join with --cluster-id", clusterid.PropertyName)
	case o.ClusterID != "" && o.ClusterID != id:
		return Result{}, fmt.Errorf("the member's cluster id is %q, not %q; renew keeps the id (leave and join to change it)", id, o.ClusterID)
	}
	o.ClusterID = id
	if o.BrokerNamespace == "" {
		if o.BrokerNamespace, err = clusterSetOf(ctx, member); err != nil {
			return Result{}, err
		}
	}
	kubeconfig, err := storedKubeconfig(ctx, member, o.MemberNamespace)
	if err != nil {
		return Result{}, err
	}
	if kubeconfig == nil {
		return Result{}, fmt.Errorf("the member has no Secret %s/%s with its broker kubeconfig: run kubectl fleetslice join with --cluster-id %s", o.MemberNamespace, SecretName, id)
	}
	if o.BrokerServer == "" {
		// The address the manager reaches the broker at may differ from the admin's.
		server, _, ok := brokerOf(kubeconfig)
		if !ok {
			return Result{}, fmt.Errorf("the member's Secret %s/%s holds no readable kubeconfig: run kubectl fleetslice join with --cluster-id %s", o.MemberNamespace, SecretName, id)
		}
		o.BrokerServer = server
	}
	return Apply(ctx, o)
}

func (o Options) withMemberNamespace() Options {
	if o.MemberNamespace == "" {
		o.MemberNamespace = DefaultMemberNamespace
	}
	return o
}

// clusterSetOf reads the broker namespace join recorded as the ClusterSet's name.
func clusterSetOf(ctx context.Context, c client.Reader) (string, error) {
	p := clusterProperty(ClusterSetPropertyName, "")
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		if apierrors.IsNotFound(err) {
			return "", errors.New("the member has no ClusterProperty " + ClusterSetPropertyName + ": name the broker namespace with --broker-namespace")
		}
		return "", fmt.Errorf("reading ClusterProperty %s: %w", ClusterSetPropertyName, err)
	}
	value, _, _ := unstructured.NestedString(p.Object, "spec", "value")
	if value == "" {
		return "", errors.New("ClusterProperty " + ClusterSetPropertyName + " has no value: name the broker namespace with --broker-namespace")
	}
	return value, nil
}
