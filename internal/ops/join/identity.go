package join

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster/brokercreds"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

// claimIdentity makes the cluster id's broker ServiceAccount this member's. It creates the
// ServiceAccount and never overwrites another's: the API server lets exactly one of two racing
// creates through, and the loser reads the winner's UID and is refused, naming it. An identity
// this member already owns only gets its labels brought up to date, guarded by its
// resourceVersion, so a racing claim cannot slip in between the read and the write.
func claimIdentity(ctx context.Context, c client.Client, o Options, uid string) error {
	var want *corev1.ServiceAccount
	for _, obj := range broker.MemberObjects(o.BrokerNamespace, o.ClusterID) {
		if sa, ok := obj.(*corev1.ServiceAccount); ok {
			want = sa
		}
	}
	metav1.SetMetaDataAnnotation(&want.ObjectMeta, MemberUIDAnnotation, uid)
	var err error
	// Each retry follows a conflict with another writer; a few settle any realistic race.
	for range 5 {
		if err = c.Create(ctx, want.DeepCopy()); err == nil || !apierrors.IsAlreadyExists(err) {
			break
		}
		current := &corev1.ServiceAccount{}
		if err = c.Get(ctx, client.ObjectKeyFromObject(want), current); apierrors.IsNotFound(err) {
			continue // a leave removed it in between: create again
		} else if err != nil {
			break
		}
		if owner := current.Annotations[MemberUIDAnnotation]; owner != uid {
			return heldByAnother(o.ClusterID, owner, uid)
		}
		if current.Labels == nil {
			current.Labels = map[string]string{}
		}
		maps.Copy(current.Labels, want.Labels)
		if err = c.Update(ctx, current); err == nil || !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("claiming the broker identity of %s: %w", o.ClusterID, err)
	}
	return nil
}

// storedKubeconfig returns the broker kubeconfig the member holds, or nil before its first join.
func storedKubeconfig(ctx context.Context, c client.Client, namespace string) ([]byte, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: SecretName}, s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the member's broker kubeconfig Secret: %w", err)
	}
	return s.Data[SecretKey], nil
}

// brokerOf returns the server and namespace of a kubeconfig's current context.
func brokerOf(kubeconfig []byte) (server, namespace string, ok bool) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", "", false
	}
	ctx, found := cfg.Contexts[cfg.CurrentContext]
	if !found {
		return "", "", false
	}
	cluster, found := cfg.Clusters[ctx.Cluster]
	if !found {
		return "", "", false
	}
	return cluster.Server, ctx.Namespace, true
}

// sameBroker reports whether a new kubeconfig reaches the broker namespace the old one did, so
// only its token changed: the running manager takes that up without a restart.
func sameBroker(old, updated []byte) bool {
	if old == nil {
		return false
	}
	oldServer, oldNamespace, ok := brokerOf(old)
	if !ok {
		return false
	}
	server, namespace, ok := brokerOf(updated)
	return ok && server == oldServer && namespace == oldNamespace
}

// tokenExpiry reads the expiry of the kubeconfig's credentials; zero when they carry none.
func tokenExpiry(kubeconfig []byte) time.Time {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return time.Time{}
	}
	ctx, found := cfg.Contexts[cfg.CurrentContext]
	if !found || cfg.AuthInfos[ctx.AuthInfo] == nil {
		return time.Time{}
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	expiry, known, err := brokercreds.Expiry(user.Token, user.ClientCertificateData)
	if err != nil || !known {
		return time.Time{}
	}
	return expiry
}
