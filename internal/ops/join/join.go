// Package join adds a member cluster with fleetslice installed to a ClusterSet's broker, and takes
// it out again: the plugin's `kubectl fleetslice join` and `kubectl fleetslice leave`.
//
// Join writes, in order: the member's identity in the broker (ServiceAccount and RoleBinding from
// the provisioning package, marked with the member's cluster UID), a kubeconfig with a token of
// that identity as a Secret in the member, the member's ClusterProperty objects, and a restart of
// the manager so it starts its multi-cluster controllers. Every check runs before the first
// write, so a refused join writes nothing.
package join

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

const (
	// MemberUIDAnnotation on a member's broker ServiceAccount holds the UID of that member's
	// kube-system namespace: the cluster's identity, which outlives any reinstall of fleetslice.
	MemberUIDAnnotation = "fleetslice.io/member-cluster-uid"
	// SecretName is the member Secret holding the broker kubeconfig (key SecretKey); the installed
	// manager mounts it.
	SecretName = "fleetslice-broker-kubeconfig"
	SecretKey  = "kubeconfig"
	// ManagerDeployment is the installed manager's Deployment.
	ManagerDeployment = "fleetslice-controller-manager"
	// DefaultMemberNamespace is where dist/install.yaml puts fleetslice.
	DefaultMemberNamespace = "fleetslice-system"
	// ClusterSetPropertyName is the ClusterProperty naming the ClusterSet (KEP-2149).
	ClusterSetPropertyName = multicluster.ClusterSetPropertyName
	// ExpiresAnnotation on the member Secret says when its token expires, for people reading it;
	// the manager reads the expiry from the token itself.
	ExpiresAnnotation = "fleetslice.io/broker-token-expires"
	restartAnnotation = "fleetslice.io/restarted-by-join"
)

// Options say which member joins which broker.
type Options struct {
	// Broker and Member authenticate with rights to write RBAC and Secrets (admins).
	Broker, Member *rest.Config
	ClusterID      string
	// BrokerNamespace is the ClusterSet's namespace in the broker (default fleetslice-broker).
	BrokerNamespace string
	// MemberNamespace is where fleetslice is installed in the member (default fleetslice-system).
	MemberNamespace string
	// BrokerServer is the broker's address as the member's manager reaches it (default: Broker's).
	BrokerServer string
	// TokenExpiration is asked of the member's broker token (default a year; join again to renew).
	TokenExpiration time.Duration
}

func (o Options) withDefaults() Options {
	if o.BrokerNamespace == "" {
		o.BrokerNamespace = multicluster.DefaultNamespace
	}
	if o.MemberNamespace == "" {
		o.MemberNamespace = DefaultMemberNamespace
	}
	return o
}

type clients struct {
	broker, member client.Client
}

// connect checks the cluster id, builds both clients and reads the member's identity.
func connect(ctx context.Context, o Options) (c clients, uid string, err error) {
	if err := clusterid.Validate(o.ClusterID); err != nil {
		return c, "", err
	}
	scheme, err := broker.Scheme()
	if err != nil {
		return c, "", err
	}
	if c.broker, err = client.New(o.Broker, client.Options{Scheme: scheme}); err != nil {
		return c, "", fmt.Errorf("broker client: %w", err)
	}
	if c.member, err = client.New(o.Member, client.Options{Scheme: scheme}); err != nil {
		return c, "", fmt.Errorf("member client: %w", err)
	}
	uid, err = memberUID(ctx, c.member)
	return c, uid, err
}

// Result says what a join did.
type Result struct {
	// Expires is when the issued token expires (zero when the broker issued one without exp).
	Expires time.Time
	// Renewed: the member had this broker's kubeconfig already, and only its token changed.
	Renewed bool
	// Restarted: the manager was rolled to start (or stop) its multi-cluster controllers. A
	// renewal does not restart it: the manager takes the new token up from its mounted Secret.
	Restarted bool
}

// Join adds the member to the ClusterSet, or refreshes its token when it has joined before. It
// refuses, writing nothing, when another cluster holds the id or the member already has another.
func Join(ctx context.Context, o Options) error {
	_, err := Apply(ctx, o)
	return err
}

// Apply is Join, telling what it did.
func Apply(ctx context.Context, o Options) (Result, error) {
	o = o.withDefaults()
	c, uid, err := connect(ctx, o)
	if err != nil {
		return Result{}, err
	}
	if err := checkBroker(ctx, c.broker, o, uid); err != nil {
		return Result{}, err
	}
	if err := checkMember(ctx, c.member, o); err != nil {
		return Result{}, err
	}
	previous, err := storedKubeconfig(ctx, c.member, o.MemberNamespace)
	if err != nil {
		return Result{}, err
	}

	// The ServiceAccount is claimed first and by create alone: of two joins racing for one id,
	// only one creates it, and the other is refused before it writes anything.
	if err := claimIdentity(ctx, c.broker, o, uid); err != nil {
		return Result{}, err
	}
	for _, obj := range broker.MemberObjects(o.BrokerNamespace, o.ClusterID) {
		if _, ok := obj.(*corev1.ServiceAccount); ok {
			continue
		}
		if err := broker.CreateOrUpdate(ctx, c.broker, obj); err != nil {
			return Result{}, fmt.Errorf("writing the member's broker identity: %w", err)
		}
	}
	kubeconfig, err := broker.IssueKubeconfig(ctx, c.broker, o.Broker, o.BrokerNamespace, o.ClusterID,
		broker.Options{Server: o.BrokerServer, TokenExpiration: o.TokenExpiration})
	if err != nil {
		return Result{}, err
	}
	res := Result{Renewed: sameBroker(previous, kubeconfig)}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: o.MemberNamespace,
			Labels: map[string]string{"app.kubernetes.io/part-of": "fleetslice"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretKey: kubeconfig},
	}
	if res.Expires = tokenExpiry(kubeconfig); !res.Expires.IsZero() {
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, ExpiresAnnotation, res.Expires.Format(time.RFC3339))
	}
	if err := broker.CreateOrUpdate(ctx, c.member, secret); err != nil {
		return res, fmt.Errorf("storing the broker kubeconfig in the member: %w", err)
	}
	if err := clusterid.Ensure(ctx, c.member, o.ClusterID); err != nil {
		return res, err
	}
	if err := broker.CreateOrUpdate(ctx, c.member, clusterProperty(ClusterSetPropertyName, o.BrokerNamespace)); err != nil {
		return res, err
	}
	if res.Renewed {
		return res, nil
	}
	res.Restarted = true
	return res, restartManager(ctx, c.member, o.MemberNamespace)
}

// Leave takes the member out of the ClusterSet: its records, endpoint copies and Lease in the
// broker (so peers withdraw its endpoints at once), its identity, the member's Secret and
// ClusterProperty objects. Leaving a ClusterSet one has not joined does nothing.
func Leave(ctx context.Context, o Options) error {
	o = o.withDefaults()
	c, uid, err := connect(ctx, o)
	if err != nil {
		return err
	}
	// An identity made by other tooling carries no owner; only another cluster's stops leave.
	owner, _, err := identityOwner(ctx, c.broker, o)
	if err != nil {
		return err
	}
	if owner != "" && owner != uid {
		return fmt.Errorf("cluster id %q in the broker belongs to another cluster (kube-system UID %s, this one is %s); nothing removed",
			o.ClusterID, owner, uid)
	}
	// The identity goes first: deleting the ServiceAccount voids its token, so a manager still
	// running in the member cannot publish its records again once they are gone.
	var errs []error
	for _, obj := range broker.MemberObjects(o.BrokerNamespace, o.ClusterID) {
		errs = append(errs, client.IgnoreNotFound(c.broker.Delete(ctx, obj)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing the member's broker identity: %w", err)
	}
	if err := multicluster.Leave(ctx, c.broker, o.BrokerNamespace, o.ClusterID); err != nil {
		return fmt.Errorf("removing the member's records from the broker: %w", err)
	}
	errs = append(errs, client.IgnoreNotFound(c.member.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: o.MemberNamespace}})))
	for _, name := range []string{clusterid.PropertyName, ClusterSetPropertyName} {
		errs = append(errs, client.IgnoreNotFound(c.member.Delete(ctx, clusterProperty(name, ""))))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return restartManager(ctx, c.member, o.MemberNamespace)
}

func memberUID(ctx context.Context, c client.Client) (string, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading the member's kube-system namespace (its identity): %w", err)
	}
	return string(ns.UID), nil
}

func checkBroker(ctx context.Context, c client.Client, o Options, uid string) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: o.BrokerNamespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the broker has no namespace %s: apply dist/broker.yaml to it first", o.BrokerNamespace)
		}
		return fmt.Errorf("reading the broker namespace: %w", err)
	}
	owner, exists, err := identityOwner(ctx, c, o)
	if err != nil || !exists {
		return err
	}
	if owner != uid {
		return heldByAnother(o.ClusterID, owner, uid)
	}
	return nil
}

func heldByAnother(id, owner, uid string) error {
	return fmt.Errorf("cluster id %q is already used by another member of the ClusterSet (kube-system UID %q, this cluster's is %s); choose another id, or run kubectl fleetslice leave for that cluster first",
		id, owner, uid)
}

// identityOwner reads the cluster's broker ServiceAccount and the member UID recorded on it.
func identityOwner(ctx context.Context, c client.Client, o Options) (owner string, exists bool, err error) {
	sa := &corev1.ServiceAccount{}
	err = c.Get(ctx, client.ObjectKey{Namespace: o.BrokerNamespace, Name: broker.ServiceAccountName(o.ClusterID)}, sa)
	switch {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("reading the broker identity of %s: %w", o.ClusterID, err)
	}
	return sa.Annotations[MemberUIDAnnotation], true, nil
}

func checkMember(ctx context.Context, c client.Client, o Options) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: o.MemberNamespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the member has no namespace %s: apply dist/install.yaml to it first", o.MemberNamespace)
		}
		return fmt.Errorf("reading the member namespace: %w", err)
	}
	existing, err := clusterid.Read(ctx, c)
	if err != nil {
		return err
	}
	if existing != "" && existing != o.ClusterID {
		return fmt.Errorf("the member already has cluster id %q (ClusterProperty %s), not %q; leave with that id first",
			existing, clusterid.PropertyName, o.ClusterID)
	}
	return nil
}

func clusterProperty(name, value string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(clusterid.GroupVersionKind)
	p.SetName(name)
	if value != "" {
		_ = unstructured.SetNestedField(p.Object, value, "spec", "value")
	}
	return p
}

// restartManager rolls the manager's Pods so they read the new broker kubeconfig (or run without
// one); a member without the installed Deployment (a manager run by hand) is left alone.
func restartManager(ctx context.Context, c client.Client, namespace string) error {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ManagerDeployment}, d)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the manager Deployment: %w", err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	metav1.SetMetaDataAnnotation(&d.Spec.Template.ObjectMeta, restartAnnotation, time.Now().UTC().Format(time.RFC3339))
	if err := c.Patch(ctx, d, patch); err != nil {
		return fmt.Errorf("restarting the manager: %w", err)
	}
	return nil
}
