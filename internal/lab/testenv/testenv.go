// Package testenv starts envtest control planes (etcd + kube-apiserver) with the binaries built by
// hack/k8s-binaries.sh and every CRD fleetslice uses installed. Suites that need several clusters
// (a broker and members) simply start several.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
)

// Cluster is one running control plane.
type Cluster struct {
	Name   string
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// Scheme registers the built-in types and every API group fleetslice uses.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, mcsv1beta1.Install, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Start launches a control plane named name with the CRDs installed.
func Start(name string) (*Cluster, error) {
	return StartWith(name)
}

// StartWith launches a control plane named name with the mcs-api CRDs and the extra CRDs
// installed, e.g. crds.Broker() for a ClusterSet's broker or crds.ClusterProperty() for a member.
func StartWith(name string, extra ...*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	return StartWithAdmission(name, nil, extra...)
}

// StartWithAdmission is StartWith with extra admission plugins enabled on the API server, such as
// OwnerReferencesPermissionEnforcement, which real clusters run and envtest does not.
func StartWithAdmission(name string, plugins []string, extra ...*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	dir, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer)
	if err != nil {
		return nil, err
	}
	defs, err := crds.MultiCluster()
	if err != nil {
		return nil, err
	}
	defs = append(defs, extra...)
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDs:                  defs,
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	// envtest gives a control plane 20s by default, which several kube-apiservers starting at
	// once on a busy 2-core CI runner overrun (go test runs packages in parallel); a slow start
	// is not a failure. Its own variable still wins when set.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = 2 * time.Minute
	}
	// Dual-stack, so suites can create Services of either family or both.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16,fd00:10::/108")
	for _, plugin := range plugins {
		env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", plugin)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting control plane %s: %w", name, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Cluster{Name: name, Config: cfg, Client: c, env: env}, nil
}

// Stop shuts the control plane down and removes its data.
func (c *Cluster) Stop() error {
	if c == nil || c.env == nil {
		return nil
	}
	return c.env.Stop()
}

// WriteKubeconfig writes a kubeconfig that reaches cfg's API server as cfg's user, for programs
// started as separate processes (a manager, a DNS server) that are configured the way users
// configure them.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*kc, path)
}

// StartClusterSet starts one control plane per member and a broker (last in the result), in
// parallel, each with the CRDs its role needs. It returns what started even when something
// failed, so that the caller can stop it.
func StartClusterSet(members []string) ([]*Cluster, error) {
	brokerCRDs, err := crds.Broker()
	if err != nil {
		return nil, err
	}
	memberCRDs, err := crds.ClusterProperty()
	if err != nil {
		return nil, err
	}
	envs := make([]*Cluster, len(members)+1)
	errs := make([]error, len(members)+1)
	var wg sync.WaitGroup
	for i := range envs {
		wg.Go(func() {
			if i == len(members) {
				envs[i], errs[i] = StartWith("broker", brokerCRDs...)
				return
			}
			envs[i], errs[i] = StartWith(members[i], memberCRDs...)
		})
	}
	wg.Wait()
	return envs, errors.Join(errs...)
}
