package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
)

// DefaultTokenExpiration is how long a member's broker token is asked to last. The broker's API
// server may cap it (--service-account-max-token-expiration); run Prepare again to reissue.
const DefaultTokenExpiration = 365 * 24 * time.Hour

// Options tune Prepare.
type Options struct {
	// TokenExpiration is asked of each member's token; zero means DefaultTokenExpiration.
	TokenExpiration time.Duration
	// Server is the broker address written into member kubeconfigs; empty means the Host of
	// the config Prepare was given.
	Server string
	// VerifyTimeout bounds the wait for the admission policies to take effect; zero means 30s.
	VerifyTimeout time.Duration
}

// Prepare installs the broker side of a ClusterSet in the API server cfg points at, with admin
// rights: the ServiceExportRecord CRD, the namespace, the member Role, the admission policies
// and one ServiceAccount identity per member. It is idempotent. It returns, per cluster id, a
// kubeconfig that authenticates as that member's ServiceAccount with a fresh token.
func Prepare(ctx context.Context, cfg *rest.Config, namespace string, clusters []string, opts Options) (map[string][]byte, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("broker client: %w", err)
	}
	if err := Install(ctx, c, namespace, clusters, opts); err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(clusters))
	for _, cluster := range clusters {
		kubeconfig, err := IssueKubeconfig(ctx, c, cfg, namespace, cluster, opts)
		if err != nil {
			return nil, err
		}
		out[cluster] = kubeconfig
	}
	if len(clusters) > 0 {
		memberConfig, err := RESTConfig(out[clusters[0]])
		if err != nil {
			return nil, err
		}
		if err := Verify(ctx, memberConfig, namespace, clusters[0], opts.VerifyTimeout); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Scheme registers what Prepare writes to the broker: what members use, and CRDs.
func Scheme() (*runtime.Scheme, error) {
	s, err := multicluster.Scheme()
	if err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Install writes the broker objects (see Prepare).
func Install(ctx context.Context, c client.Client, namespace string, clusters []string, opts Options) error {
	if namespace == "" {
		return errors.New("no broker namespace given")
	}
	for _, cluster := range clusters {
		if err := clusterid.Validate(cluster); err != nil {
			return err
		}
	}
	defs, err := crds.Broker()
	if err != nil {
		return err
	}
	if err := crds.Install(ctx, c, defs); err != nil {
		return err
	}
	objects := SharedObjects(namespace)
	for _, cluster := range clusters {
		objects = append(objects, MemberObjects(namespace, cluster)...)
	}
	for _, obj := range objects {
		if err := CreateOrUpdate(ctx, c, obj); err != nil {
			return err
		}
	}
	return nil
}

// CreateOrUpdate writes obj as it is given, creating it or replacing what the server holds.
func CreateOrUpdate(ctx context.Context, c client.Client, obj client.Object) error {
	desired := obj.DeepCopyObject().(client.Object)
	current := obj.DeepCopyObject().(client.Object)
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading %T %s: %w", obj, obj.GetName(), err)
	}
	desired.SetResourceVersion(current.GetResourceVersion())
	if err := c.Update(ctx, desired); err != nil {
		return fmt.Errorf("updating %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// IssueKubeconfig requests a token for cluster's ServiceAccount and returns a kubeconfig that
// reaches the broker as that member, with namespace as its default namespace.
func IssueKubeconfig(ctx context.Context, c client.Client, cfg *rest.Config, namespace, cluster string, opts Options) ([]byte, error) {
	expiration := opts.TokenExpiration
	if expiration == 0 {
		expiration = DefaultTokenExpiration
	}
	sa := &corev1.ServiceAccount{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ServiceAccountName(cluster)}, sa); err != nil {
		return nil, fmt.Errorf("member %s has no broker identity: %w", cluster, err)
	}
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(expiration / time.Second)),
	}}
	if err := c.SubResource("token").Create(ctx, sa, request); err != nil {
		return nil, fmt.Errorf("requesting a broker token for member %s: %w", cluster, err)
	}
	ca := slices.Clone(cfg.CAData)
	if len(ca) == 0 && cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the broker CA: %w", err)
		}
		ca = data
	}
	server := opts.Server
	if server == "" {
		server = cfg.Host
	}
	name := "fleetslice-broker"
	kubeconfig := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{name: {
			Server:                   server,
			CertificateAuthorityData: ca,
			TLSServerName:            cfg.TLSClientConfig.ServerName,
			InsecureSkipTLSVerify:    cfg.TLSClientConfig.Insecure,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{ServiceAccountName(cluster): {Token: request.Status.Token}},
		Contexts: map[string]*clientcmdapi.Context{name: {
			Cluster: name, AuthInfo: ServiceAccountName(cluster), Namespace: namespace,
		}},
		CurrentContext: name,
	}
	return clientcmd.Write(kubeconfig)
}

// RESTConfig turns a member kubeconfig from Prepare into a rest.Config.
func RESTConfig(kubeconfig []byte) (*rest.Config, error) {
	return clientcmd.RESTConfigFromKubeConfig(kubeconfig)
}
